// The command palette (Ctrl+K): the page's verbs, filtered as you type.
import { h } from "./dom";

export type Command = { label: string; run: () => unknown };

const base: Command[] = [
  { label: "Go to Inbox", run: () => (location.hash = "#/") },
  { label: "Go to Fleet", run: () => (location.hash = "#/fleet") },
  { label: "Go to Accounts", run: () => (location.hash = "#/accounts") },
];
let page: Command[] = [];

/** setCommands gives the palette the current page's verbs. */
export function setCommands(cmds: Command[]): void {
  page = cmds;
}

export function installPalette(): void {
  const dlg = document.getElementById("palette") as HTMLDialogElement;
  const input = document.getElementById("palette-input") as HTMLInputElement;
  const list = document.getElementById("palette-list")!;
  let shown: Command[] = [];
  let active = 0;
  const draw = () => {
    const q = input.value.toLowerCase();
    shown = [...page, ...base].filter((c) => c.label.toLowerCase().includes(q)).slice(0, 30);
    active = Math.min(active, Math.max(shown.length - 1, 0));
    list.replaceChildren(
      ...shown.map((c, i) =>
        h("li", { role: "option", id: `pal-${i}`, "aria-selected": String(i === active), onclick: () => choose(i) }, c.label),
      ),
    );
    input.setAttribute("aria-activedescendant", shown.length ? `pal-${active}` : "");
  };
  const choose = (i: number) => {
    const c = shown[i];
    dlg.close();
    if (c) void c.run();
  };
  const open = () => {
    input.value = "";
    active = 0;
    draw();
    dlg.showModal();
    input.focus();
  };
  input.addEventListener("input", () => ((active = 0), draw()));
  input.addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown") active = Math.min(active + 1, shown.length - 1);
    else if (e.key === "ArrowUp") active = Math.max(active - 1, 0);
    else if (e.key === "Enter") {
      // Not passed on: closing the dialog gives focus back to the button
      // that had it, which this Enter would press too.
      e.preventDefault();
      return choose(active);
    } else return;
    e.preventDefault();
    draw();
  });
  document.getElementById("palette-open")!.addEventListener("click", open);
  document.addEventListener("keydown", (e) => {
    if (e.key.toLowerCase() === "k" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      open();
    }
  });
}

/** resetCommands clears the page's verbs on navigation. */
export function resetCommands(): void {
  page = [];
}
