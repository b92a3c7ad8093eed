// A small element builder: the app has no framework, so every node it
// draws is made here with text content (never HTML from the server).
type Attrs = Record<string, string | boolean | number | EventListener | undefined>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v as EventListener);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return el;
}

/** ago is a short relative time ("3m ago"). */
export function ago(d: Date | undefined): string {
  if (!d) return "";
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** say puts a message in the page's live status line. */
export function say(text: string, alert = false): void {
  const el = document.getElementById("status")!;
  el.textContent = text;
  el.className = alert ? "status alert" : "status";
  el.setAttribute("role", alert ? "alert" : "status");
}

/** unsay clears the status line if it still says text (not what was said since). */
export function unsay(text: string): void {
  if (document.getElementById("status")!.textContent === text) say("");
}
