// An `input` frame of a chat turn — an app asking the user something during a tool call — as a
// form in the conversation. Elicitation (`elicitation/create`) forms are built from the request's
// `requestedSchema` (flat properties: string, number, integer, boolean, enums); a URL-mode
// elicitation shows the link. Anything else the app may ask (sampling, roots) is declined.
// The answer goes to `POST /apps/chat/{sessionId}/input`.

function field(name, schema, required) {
  const wrapper = document.createElement("div");
  wrapper.className = "field";
  const id = `input-${crypto.randomUUID()}`;
  const label = document.createElement("label");
  label.htmlFor = id;
  // A checkbox is never required (unchecked is an answer too): no star on it.
  label.textContent = (schema.title ?? name) + (required && schema.type !== "boolean" ? " *" : "");
  let control;
  const options = schema.enum ?? schema.oneOf?.map((o) => o.const);
  if (Array.isArray(options)) {
    control = document.createElement("select");
    const titles = schema.enumNames ?? schema.oneOf?.map((o) => o.title ?? o.const) ?? options;
    options.forEach((value, i) => {
      const option = document.createElement("option");
      option.value = String(value);
      option.textContent = String(titles[i] ?? value);
      control.append(option);
    });
    if (schema.default !== undefined) control.value = String(schema.default);
  } else if (schema.type === "boolean") {
    control = document.createElement("input");
    control.type = "checkbox";
    control.checked = schema.default === true;
    wrapper.classList.add("checkbox");
  } else {
    control = document.createElement("input");
    control.type = schema.type === "number" || schema.type === "integer" ? "number" : schema.format === "email" ? "email" : "text";
    if (schema.type === "integer") control.step = "1";
    if (schema.minimum !== undefined) control.min = String(schema.minimum);
    if (schema.maximum !== undefined) control.max = String(schema.maximum);
    if (schema.default !== undefined) control.value = String(schema.default);
  }
  control.id = id;
  control.name = name;
  control.required = required && schema.type !== "boolean";
  if (schema.description) {
    const hint = document.createElement("small");
    hint.textContent = schema.description;
    hint.id = `${id}-hint`;
    control.setAttribute("aria-describedby", hint.id);
    wrapper.append(label, control, hint);
  } else {
    wrapper.append(label, control);
  }
  return wrapper;
}

function valueOf(control, schema) {
  if (schema.type === "boolean") return control.checked;
  if (control.value === "") return undefined;
  if (schema.type === "number") return Number(control.value);
  if (schema.type === "integer") return Math.trunc(Number(control.value));
  const options = schema.enum ?? schema.oneOf?.map((o) => o.const);
  if (Array.isArray(options)) return options.find((o) => String(o) === control.value) ?? control.value;
  return control.value;
}

/** An answer's value as the user reads it (the enum's title when it has one). */
function shownValue(value, schema) {
  if (typeof value === "boolean") return value ? "yes" : "no";
  const options = schema?.enum ?? schema?.oneOf?.map((o) => o.const);
  if (Array.isArray(options)) {
    const titles = schema.enumNames ?? schema.oneOf?.map((o) => o.title ?? o.const) ?? options;
    const i = options.findIndex((o) => String(o) === String(value));
    if (i >= 0) return String(titles[i] ?? value);
  }
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/** The status line of an answered form: what was answered, and the values sent. */
function answerText(reply, properties) {
  if (reply.error) return "Declined.";
  const action = reply.result?.action;
  if (action !== "accept") return `Answered: ${action ?? "nothing"}.`;
  const content = reply.result?.content;
  if (!content || typeof content !== "object" || Object.keys(content).length === 0) return "Sent.";
  const parts = Object.entries(content).map(([name, value]) => `${properties?.[name]?.title ?? name}: ${shownValue(value, properties?.[name])}`);
  return `Sent. ${parts.join(" · ")}`;
}

/**
 * @param {object} frame `{inputId, method, params}`
 * @param {(answer: {result?: object, error?: object}) => Promise<void>} answer
 * @param {{result?: object, error?: object}} [answered] the answer already given (a reloaded
 *   chat): the form is shown answered, its controls disabled and holding the values sent
 * @returns {HTMLElement}
 */
export function inputForm(frame, appName, answer, answered) {
  const form = document.createElement("form");
  form.className = "input-request card";
  form.dataset.inputId = frame.inputId;
  const heading = document.createElement("p");
  heading.className = "input-heading";
  const params = frame.params ?? {};
  const buttons = document.createElement("div");
  buttons.className = "dialog-buttons";
  const status = document.createElement("p");
  status.className = "input-status";
  status.setAttribute("role", "status");

  const button = (label, value, primary) => {
    const b = document.createElement("button");
    b.type = value === "accept" ? "submit" : "button";
    b.textContent = label;
    b.value = value;
    if (primary) b.className = "primary";
    return b;
  };

  let fields = [];
  let build = () => ({});
  if (frame.method === "elicitation/create" && params.mode === "url") {
    heading.textContent = `${appName} asks you to visit a page: ${params.message ?? ""}`;
    const link = document.createElement("a");
    link.href = /^https?:/i.test(params.url ?? "") ? params.url : "#";
    link.textContent = params.url ?? "";
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    form.append(heading, link);
    buttons.append(button("Done", "accept", true), button("Decline", "decline"), button("Cancel", "cancel"));
  } else if (frame.method === "elicitation/create") {
    heading.textContent = params.message ?? `${appName} asks for input`;
    form.append(heading);
    const schema = params.requestedSchema ?? {};
    const required = new Set(schema.required ?? []);
    fields = Object.entries(schema.properties ?? {}).map(([name, s]) => [name, s, field(name, s, required.has(name))]);
    for (const [, , element] of fields) form.append(element);
    build = () => {
      const content = {};
      for (const [name, s, element] of fields) {
        const value = valueOf(element.querySelector("input, select"), s);
        if (value !== undefined) content[name] = value;
      }
      return content;
    };
    buttons.append(button("Submit", "accept", true), button("Decline", "decline"), button("Cancel", "cancel"));
  } else {
    heading.textContent = `${appName} asked for something this page cannot give (${frame.method}).`;
    form.append(heading);
    buttons.append(button("Dismiss", "refuse", true));
  }
  form.append(buttons, status);

  const properties = frame.method === "elicitation/create" ? params.requestedSchema?.properties ?? {} : {};
  const showAnswered = (reply) => {
    for (const b of form.querySelectorAll("button, input, select")) b.disabled = true;
    const content = reply.result?.action === "accept" ? reply.result?.content ?? {} : {};
    for (const [name, s, element] of fields) {
      const control = element.querySelector("input, select");
      if (!(name in content)) continue;
      if (s.type === "boolean") control.checked = content[name] === true;
      else control.value = String(content[name]);
    }
    status.textContent = answerText(reply, properties);
    form.dataset.answered = "true";
  };

  if (answered) {
    showAnswered(answered);
    return form;
  }

  const finish = async (reply) => {
    for (const b of form.querySelectorAll("button, input, select")) b.disabled = true;
    status.textContent = "Sending…";
    try {
      await answer(reply);
      showAnswered(reply);
    } catch (error) {
      status.textContent = `Could not answer: ${error.message}`;
      for (const b of form.querySelectorAll("button, input, select")) b.disabled = false;
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = build();
    finish({ result: frame.method === "elicitation/create" && params.mode !== "url" ? { action: "accept", content } : { action: "accept" } });
  });
  for (const b of buttons.querySelectorAll("button[type=button]")) {
    b.addEventListener("click", () => {
      if (b.value === "refuse") finish({ error: { code: -32601, message: `the user's page does not support ${frame.method}` } });
      else finish({ result: { action: b.value } });
    });
  }
  queueMicrotask(() => form.querySelector("input, select, button")?.focus());
  return form;
}
