// Loaded without `defer` in the page's <head>, before the stylesheet applies: a stored theme
// choice is in effect from the first paint, so a dark-theme user never sees a light flash (the
// page's CSP allows no inline script, hence this tiny file).
import { storedTheme } from "./theme_choice.js";

const theme = storedTheme();
if (theme) document.documentElement.dataset.theme = theme;
