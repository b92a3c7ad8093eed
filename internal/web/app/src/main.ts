// cast's web timeline: a hash router over four pages.
import "./style.css";
import { auth, errorText } from "./api";
import { accountsPage } from "./accounts";
import { say } from "./dom";
import { fleet } from "./fleet";
import { inbox } from "./inbox";
import { installPalette, resetCommands } from "./palette";
import { timeline } from "./timeline";

const main = document.getElementById("main")!;
let current: AbortController | undefined;

async function route(): Promise<void> {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  resetCommands();
  say("");
  const path = location.hash.replace(/^#/, "") || "/";
  for (const a of document.querySelectorAll<HTMLAnchorElement>("nav a")) {
    const here = a.getAttribute("href") === "#" + path || (path.startsWith("/s/") && a.getAttribute("href") === "#/");
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    const m = path.match(/^\/s\/([^/]+)$/);
    if (m) await timeline(main, decodeURIComponent(m[1]), ctl.signal);
    else if (path === "/fleet") await fleet(main, ctl.signal);
    else if (path === "/accounts") await accountsPage(main, ctl.signal);
    else await inbox(main, ctl.signal);
  } catch (err) {
    if (!ctl.signal.aborted) say(errorText(err), true);
  }
}

async function whoami(): Promise<void> {
  try {
    const r = await auth.whoAmI({});
    document.getElementById("who")!.textContent = r.principal;
  } catch (err) {
    say(errorText(err), true);
  }
}

document.getElementById("signout")!.addEventListener("click", async () => {
  await fetch("/auth/logout", { method: "POST" });
  document.getElementById("who")!.textContent = "";
  say("Signed out. Run `cast web` to sign in again.");
});
installPalette();
window.addEventListener("hashchange", () => void route());
void whoami();
void route();
