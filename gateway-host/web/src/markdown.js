// Assistant text as Markdown: `marked` (GFM: lists, tables, fenced code) turns it into HTML and
// `DOMPurify` keeps only inert markup, so a `<script>`, an on* handler or a javascript: link in
// what the model says never runs. Links open in a new tab, without access to this page.
import DOMPurify from "dompurify";
import { Marked } from "marked";

const marked = new Marked({ gfm: true, breaks: false, async: false });

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const OPTIONS = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "img"],
  FORBID_ATTR: ["style"],
};

/** The sanitized HTML of `text` read as Markdown. */
export function markdownHtml(text) {
  let html;
  try {
    html = marked.parse(String(text ?? ""));
  } catch {
    return purify.sanitize(String(text ?? "").replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]), OPTIONS);
  }
  return purify.sanitize(html, OPTIONS);
}

/** Renders `text` as Markdown into `element` (replacing what it held). */
export function renderMarkdown(element, text) {
  element.innerHTML = markdownHtml(text);
  for (const table of element.querySelectorAll("table")) {
    if (table.parentElement?.classList.contains("table-scroll")) continue;
    const wrap = document.createElement("div");
    wrap.className = "table-scroll";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  for (const pre of element.querySelectorAll("pre")) pre.tabIndex = 0;
}
