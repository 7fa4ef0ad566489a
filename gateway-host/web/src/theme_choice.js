// The light/dark choice a user made with the page's theme button, kept in localStorage. Shared
// by host.js (the button) and theme.js (which applies the choice before the page paints).

export const THEME_KEY = "gateway-host-theme";

/** The stored choice, `"light"` or `"dark"`, or null when the user made none. */
export function storedTheme() {
  try {
    const theme = localStorage.getItem(THEME_KEY);
    return theme === "light" || theme === "dark" ? theme : null;
  } catch {
    return null;
  }
}
