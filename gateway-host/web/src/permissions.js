// `_meta.ui.permissions` of an app's UI resource → the iframe `allow` attribute. Both frames
// need it (permission delegation passes through the sandbox proxy's frame to the app's), so the
// host page and the proxy share this one mapping. The mapping is the MCP Apps spec's; the
// official `buildAllowAttribute` of ext-apps is the same table, but importing it into the proxy
// would pull the whole bridge into a page that only relays messages.
const FEATURES = {
  camera: "camera",
  microphone: "microphone",
  geolocation: "geolocation",
  clipboardWrite: "clipboard-write",
};

export function allowAttribute(permissions) {
  if (!permissions || typeof permissions !== "object") return "";
  return Object.keys(FEATURES)
    .filter((key) => permissions[key] && typeof permissions[key] === "object")
    .map((key) => FEATURES[key])
    .join("; ");
}
