// The "Add app" form (SPEC R53): `POST /admin/mcpapps/install` `{source, id?, prefix?}` with the
// gateway token as `Authorization: Bearer`, as every /admin route takes it (never the page's
// session cookie). Shown only when the gateway has a token (`/apps/health` `admin`); the token is
// asked for each time and not kept. The new app then appears in the list through /apps/events.
const $ = (id) => document.getElementById(id);

/** Shows the "Add app" button when the gateway's admin routes can be used. */
export function initInstallForm({ admin, onInstalled }) {
  const button = $("add-app");
  button.hidden = !admin;
  if (!admin || button.dataset.ready) return;
  button.dataset.ready = "1";
  const dialog = $("install-dialog");
  const form = $("install-form");
  button.addEventListener("click", () => {
    $("install-error").textContent = "";
    $("install-progress").textContent = "";
    dialog.showModal();
    $("install-source").focus();
  });
  $("install-cancel").addEventListener("click", () => dialog.close());
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (name) => form.elements[name].value.trim();
    const body = { source: value("source") };
    if (value("id")) body.id = value("id");
    if (value("prefix")) body.prefix = value("prefix");
    $("install-error").textContent = "";
    $("install-progress").textContent = `Installing ${body.source}… (fetching the package can take a minute)`;
    $("install-submit").disabled = true;
    form.setAttribute("aria-busy", "true");
    try {
      const response = await fetch("/admin/mcpapps/install", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", Authorization: `Bearer ${value("token")}` },
        body: JSON.stringify(body),
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) {
        const message = answer?.error?.message ?? `${response.status} ${response.statusText}`;
        $("install-error").textContent = response.status === 401 ? "That token is not valid." : message;
        $("install-progress").textContent = "";
        return;
      }
      form.reset();
      dialog.close();
      onInstalled?.(answer);
    } catch (error) {
      $("install-error").textContent = `The gateway did not answer: ${error.message}`;
      $("install-progress").textContent = "";
    } finally {
      $("install-submit").disabled = false;
      form.removeAttribute("aria-busy");
    }
  });
}
