// Timeline: one session's transcript, newest page first, older pages
// fetched as you scroll up, new messages live from WatchSession; the
// header panel moves the session (switch, fork, hand off) and the
// composer sends, interrupts and answers permissions.
import { errorText, isAbort, requestId, sessions } from "./api";
import { ago, h, say } from "./dom";
import { MessageKind, SessionState, type Message, type Session } from "./gen/cast/v1/session_pb";
import { agentList, date, displayName, lineage, stateClass, stateLabel } from "./labels";
import { setCommands } from "./palette";

const PAGE = 200; // messages per page fetched
const FOLD = 2000; // characters of a tool output shown before "show all"

export async function timeline(main: HTMLElement, id: string, signal: AbortSignal): Promise<void> {
  let sess = await sessions.getSession({ sessionId: id }, { signal });
  const view = new View(main, sess, signal);
  await view.panel();
  const last = sess.lastSeq;
  let first = last > 0n ? bigMax(1n, last - BigInt(PAGE) + 1n) : 1n;
  if (last > 0n) view.add(await readRange(id, first, last, signal), "end");
  view.scrollToEnd();
  // Older pages as the top sentinel comes into view.
  let loading = false;
  const io = new IntersectionObserver(async (entries) => {
    if (!entries.some((e) => e.isIntersecting) || loading || first <= 1n) return;
    loading = true;
    const from = bigMax(1n, first - BigInt(PAGE));
    try {
      const msgs = await readRange(id, from, first - 1n, signal);
      first = from;
      view.add(msgs, "start");
    } catch (err) {
      if (!isAbort(err)) say(errorText(err), true);
    } finally {
      loading = false;
      view.older.hidden = first <= 1n;
    }
  });
  view.older.hidden = first <= 1n;
  io.observe(view.older);
  signal.addEventListener("abort", () => io.disconnect());
  // Live: from the seq after the newest shown; the stream also carries
  // every change of the session record.
  void (async () => {
    try {
      for await (const ev of sessions.watchSession({ sessionId: id, startSeq: last + 1n }, { signal })) {
        if (ev.event.case === "message") view.add([ev.event.value], "end", true);
        if (ev.event.case === "session") {
          sess = ev.event.value;
          view.update(sess);
        }
      }
    } catch (err) {
      if (!isAbort(err)) say("Live updates stopped: " + errorText(err), true);
    }
  })();
}

async function readRange(id: string, start: bigint, end: bigint, signal: AbortSignal): Promise<Message[]> {
  const out: Message[] = [];
  let pageToken = "";
  do {
    const r = await sessions.listMessages({ sessionId: id, startSeq: start, endSeq: end, pageSize: PAGE, pageToken }, { signal });
    out.push(...r.messages);
    pageToken = r.nextPageToken;
  } while (pageToken);
  return out;
}

function bigMax(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

class View {
  readonly older = h("div", { class: "older muted" }, "Loading older messages…");
  private readonly list = h("ol", { class: "timeline", "aria-label": "Messages" });
  private readonly scroller = h("div", { class: "scroller", tabindex: 0, "aria-label": "Transcript" }, this.older, this.list);
  private readonly head = h("section", { class: "panel", "aria-label": "Session" });
  private readonly perm = h("div", { class: "permission", role: "region", "aria-label": "Permission" });
  private readonly forks = h("ul", { class: "forks", "aria-label": "Forks made here" });
  private readonly seen = new Set<bigint>();
  private readonly calls = new Map<string, HTMLElement>();
  private readonly imgs: string[] = [];

  constructor(
    private readonly main: HTMLElement,
    private sess: Session,
    private readonly signal: AbortSignal,
  ) {
    main.replaceChildren(this.head, this.perm, this.scroller, this.composer());
    signal.addEventListener("abort", () => this.imgs.forEach((u) => URL.revokeObjectURL(u)));
  }

  async panel(): Promise<void> {
    const s = this.sess;
    const agents = await agentList();
    const live = s.lastSeq > 0n;
    const pick = h("select", { id: "move-agent" });
    for (const a of agents) {
      const label = a.takesOverHistory ? a.displayName : `${a.displayName} — can't rebuild history`;
      pick.append(h("option", { value: a.name, "data-rebuilds": String(a.takesOverHistory), title: a.refusal || undefined }, label));
    }
    const other = agents.find((a) => a.name !== s.agent && a.takesOverHistory);
    if (other) pick.value = other.name;
    const model = h("input", { id: "move-model", type: "text", placeholder: "default", autocomplete: "off" });
    const verb = (label: string, hint: string, fn: () => Promise<void>) =>
      h("button", { type: "button", "aria-description": hint, title: hint, onclick: () => void fn() }, label);
    this.head.replaceChildren(
      h("h1", {}, s.title || s.id),
      h(
        "p",
        { class: "agentline" },
        h("strong", { id: "agent-name" }, await displayName(s.agent)),
        " · ",
        h("span", { id: "model-name" }, s.model || "default model"),
        " · node ",
        h("span", {}, s.node),
        " · ",
        h("span", { id: "state", class: stateClass(s) }, stateLabel(s)),
      ),
      h("p", { class: "muted", id: "state-line" }, live ? "Live session · picks apply in place" : "Blank session · picks apply at launch"),
      h("p", { class: "muted" }, lineage(s), " ", lineageLink(s)),
      h(
        "fieldset",
        { class: "move" },
        h("legend", {}, "Move this session"),
        h("label", { for: "move-agent" }, "Agent"),
        pick,
        h("label", { for: "move-model" }, "Model"),
        model,
        h(
          "div",
          { class: "verbs" },
          verb("Switch agent", "Same session, another agent", () => this.switchTo(pick.value, model.value)),
          verb("Fork as", "A copy of this session on another agent", () => this.forkAs(pick.value, model.value)),
          verb("Hand off to", "A fresh session, seeded with a brief", () => this.handoff(pick.value, model.value)),
        ),
      ),
      this.forks,
    );
    this.perm.hidden = s.state !== SessionState.WAITING_PERMISSION;
    this.drawPermission();
    setCommands(
      agents.flatMap((a) => [
        { label: `Switch agent to ${a.displayName}`, run: () => this.switchTo(a.name, "") },
        { label: `Fork as ${a.displayName}`, run: () => this.forkAs(a.name, "") },
        { label: `Hand off to ${a.displayName}`, run: () => this.handoff(a.name, "") },
      ]).concat([
        { label: "Interrupt", run: () => this.interrupt() },
        { label: "Approve the pending permission", run: () => this.answer(true, "") },
        { label: "Deny the pending permission", run: () => this.answer(false, "") },
      ]),
    );
  }

  update(s: Session): void {
    const agentChanged = s.agent !== this.sess.agent || s.model !== this.sess.model;
    this.sess = s;
    const st = document.getElementById("state");
    if (st) {
      st.textContent = stateLabel(s);
      st.className = stateClass(s);
    }
    this.perm.hidden = s.state !== SessionState.WAITING_PERMISSION;
    if (agentChanged) void this.panel();
    else document.getElementById("state-line")!.textContent = s.lastSeq > 0n ? "Live session · picks apply in place" : "Blank session · picks apply at launch";
  }

  private drawPermission(): void {
    const why = h("input", { id: "deny-why", type: "text", placeholder: "why (told to the agent)" });
    this.perm.replaceChildren(
      h("p", {}, h("strong", {}, "The agent waits on your permission"), " to run a tool."),
      h("button", { type: "button", id: "approve", onclick: () => void this.answer(true, "") }, "Approve"),
      h("label", { for: "deny-why" }, "Reason"),
      why,
      h("button", { type: "button", id: "deny", onclick: () => void this.answer(false, why.value) }, "Deny"),
    );
  }

  private composer(): HTMLElement {
    const text = h("textarea", { id: "compose", rows: 2, placeholder: "Message (Ctrl+Enter sends)" });
    const send = async () => {
      const t = text.value.trim();
      if (!t) return;
      try {
        await sessions.sendMessage({ sessionId: this.sess.id, text: t, requestId: requestId() });
        text.value = "";
        say("Sent.");
      } catch (err) {
        say(errorText(err), true);
      }
    };
    text.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        void send();
      }
    });
    return h(
      "form",
      { class: "composer", onsubmit: (e: Event) => (e.preventDefault(), void send()) },
      h("label", { for: "compose", class: "sr-only" }, "Message"),
      text,
      h("button", { type: "submit" }, "Send"),
      h("button", { type: "button", onclick: () => void this.interrupt() }, "Interrupt"),
    );
  }

  private async interrupt(): Promise<void> {
    try {
      const r = await sessions.interruptSession({ sessionId: this.sess.id });
      say(r.idle ? "Nothing to stop." : r.delivered ? "Interrupted." : "The node is down; the interrupt waits for it.");
    } catch (err) {
      say(errorText(err), true);
    }
  }

  private async answer(allow: boolean, message: string): Promise<void> {
    try {
      const r = await sessions.answerPermission({ sessionId: this.sess.id, allow, message });
      say(`${allow ? "Approved" : "Denied"} ${r.toolName}.`);
    } catch (err) {
      say(errorText(err), true);
    }
  }

  // switchTo shows the pick at once and puts the old agent back if the
  // server refuses it.
  private async switchTo(agent: string, model: string): Promise<void> {
    const same = agent === this.sess.agent;
    const name = document.getElementById("agent-name")!;
    const was = name.textContent;
    name.textContent = `${await displayName(agent)} (switching…)`;
    try {
      const s = await sessions.switchSession({ sessionId: this.sess.id, agent: same ? "" : agent, model });
      if (s.id !== this.sess.id) {
        say(`The switch became a handoff: now ${s.id}.`);
        location.hash = `#/s/${s.id}`;
        return;
      }
      say(`Switched to ${await displayName(s.agent)}.`);
    } catch (err) {
      name.textContent = was;
      say("Switch refused: " + errorText(err), true);
    }
  }

  // forkAs shows the fork at once as a stub row marked "copying", which
  // becomes a link when the server answers, or goes with the error.
  private async forkAs(agent: string, model: string): Promise<void> {
    const stub = h("li", { class: "stub", "aria-busy": "true" }, `Fork as ${await displayName(agent)} — copying…`);
    this.forks.append(stub);
    try {
      const s = await sessions.forkSession({ sessionId: this.sess.id, agent, model, requestId: requestId() });
      stub.removeAttribute("aria-busy");
      stub.className = "fork";
      stub.replaceChildren(h("a", { href: `#/s/${s.id}` }, `Fork ${s.id} on ${await displayName(s.agent)}`));
      say(`Forked as ${s.id}.`);
    } catch (err) {
      stub.remove();
      say("Fork refused: " + errorText(err), true);
    }
  }

  private async handoff(agent: string, model: string): Promise<void> {
    say("Writing the brief…");
    try {
      const r = await sessions.handoffSession({ sessionId: this.sess.id, toAgent: agent, model, requestId: requestId() });
      if (r.session) {
        this.forks.append(h("li", { class: "fork" }, h("a", { href: `#/s/${r.session.id}` }, `Handed off to ${r.session.id}`)));
        say(`Handed off to ${r.session.id} (${r.briefSource} brief).`);
      }
    } catch (err) {
      say("Handoff refused: " + errorText(err), true);
    }
  }

  // scrollToEnd shows the newest message: the transcript's own scroll box
  // on a wide screen, the page on a phone (where the box grows instead).
  scrollToEnd(): void {
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.list.lastElementChild?.scrollIntoView({ block: "end" });
  }

  // atEnd: the reader sees the newest message (its top is on screen, in
  // the transcript's box), so a live one follows. Heights of rows not yet
  // drawn are estimates, so the scroll offsets alone would not say.
  private atEnd(): boolean {
    const last = this.list.lastElementChild;
    if (!last) return true;
    const bottom = Math.min(window.innerHeight, this.scroller.getBoundingClientRect().bottom);
    return last.getBoundingClientRect().top < bottom + 40;
  }

  add(msgs: Message[], where: "start" | "end", live = false): void {
    const nodes: HTMLElement[] = [];
    for (const m of msgs) {
      if (this.seen.has(m.seq)) continue;
      this.seen.add(m.seq);
      const el = this.render(m);
      if (el) nodes.push(el);
    }
    if (where === "start") {
      // Older messages go above without moving what the reader sees.
      const box = this.scroller;
      const before = box.scrollHeight;
      this.list.prepend(...nodes);
      box.scrollTop += box.scrollHeight - before;
      return;
    }
    const follow = live && this.atEnd();
    this.list.append(...nodes);
    if (follow && nodes.length) this.scrollToEnd();
  }

  private render(m: Message): HTMLElement | null {
    const when = date(m.createTime);
    const meta = h("span", { class: "meta" }, `#${m.seq}`, when ? ` · ${ago(when)}` : "");
    switch (m.kind) {
      case MessageKind.USER:
        return h("li", { class: "msg user", "data-seq": String(m.seq) }, h("div", { class: "who" }, "You ", meta), text(m.text), this.images(m));
      case MessageKind.ASSISTANT:
        return h("li", { class: "msg assistant", "data-seq": String(m.seq) }, h("div", { class: "who" }, m.agent || "assistant", " ", meta), text(m.text));
      case MessageKind.THINKING:
        return h("li", { class: "msg thinking", "data-seq": String(m.seq) }, h("details", {}, h("summary", {}, "Thinking"), text(m.text)));
      case MessageKind.TOOL_CALL: {
        const call = m.toolCall!;
        const body = h("div", { class: "tool-body" }, h("pre", { class: "input" }, call.input));
        const li = h(
          "li",
          { class: "msg tool", "data-seq": String(m.seq) },
          h("details", {}, h(
            "summary",
            {},
            h("span", { class: "tool-name" }, call.name),
            h("span", { class: "tool-state muted" }, " · running"),
            " ",
            h("span", { class: "tool-preview muted" }, preview(call.input)),
          ), body),
        );
        this.calls.set(call.id, body);
        return li;
      }
      case MessageKind.TOOL_RESULT: {
        const r = m.toolResult!;
        const out = fold(r.output, r.isError);
        const imgs = this.images(m);
        const body = this.calls.get(r.callId);
        if (body) {
          body.append(out, imgs);
          const st = body.parentElement?.querySelector(".tool-state");
          if (st) st.textContent = r.isError ? " · failed" : " · done";
          return null;
        }
        return h("li", { class: "msg tool", "data-seq": String(m.seq) }, h("details", {}, h("summary", {}, "Tool result"), out, imgs));
      }
      case MessageKind.NOTICE: {
        // The first line (or sentence) on the rule, the rest under it.
        const [head, ...rest] = splitNotice(m.text);
        return h(
          "li",
          { class: `divider notice-${m.noticeType || "note"}`, role: "separator", "aria-label": m.text, "data-seq": String(m.seq) },
          h("div", { class: "rule" }, h("span", {}, head)),
          rest.length ? h("p", { class: "rest" }, rest.join(" ")) : null,
        );
      }
      default:
        return null; // internal rows are never drawn
    }
  }

  private images(m: Message): HTMLElement {
    const box = h("div", { class: "images" });
    for (const img of m.images) {
      const url = URL.createObjectURL(new Blob([img.data as BlobPart], { type: img.mediaType }));
      this.imgs.push(url);
      box.append(h("img", { src: url, alt: `image (${img.mediaType})`, loading: "lazy" }));
    }
    return box;
  }
}

// lineageLink opens the session this one came from.
function lineageLink(s: Session): HTMLElement | string {
  const from = s.parentId || s.handoffFrom;
  return from ? h("a", { href: `#/s/${from}` }, `open ${from}`) : "";
}

function splitNotice(t: string): string[] {
  const nl = t.indexOf("\n");
  if (nl >= 0) return [t.slice(0, nl), t.slice(nl + 1)];
  const dot = t.indexOf(". ");
  return dot >= 0 && t.length > 80 ? [t.slice(0, dot + 1), t.slice(dot + 2)] : [t];
}

// preview is a tool input's gist for its folded row: a command, a path,
// else the start of its JSON.
function preview(input: string): string {
  let s = input;
  try {
    const v = JSON.parse(input) as Record<string, unknown>;
    const pick = v.command ?? v.cmd ?? v.file_path ?? v.path ?? v.pattern;
    if (pick !== undefined) s = Array.isArray(pick) ? pick.join(" ") : String(pick);
  } catch {
    // not JSON: shown as it is
  }
  return s.length > 80 ? s.slice(0, 79) + "…" : s;
}

function text(t: string): HTMLElement {
  return h("div", { class: "text" }, t);
}

// fold shows a long tool output's start with a button for the rest.
function fold(output: string, isError: boolean): HTMLElement {
  const pre = h("pre", { class: isError ? "output error" : "output" }, output.length > FOLD ? output.slice(0, FOLD) : output);
  if (output.length <= FOLD) return pre;
  const more = h("button", { type: "button" }, `Show all ${output.length} characters`);
  more.addEventListener("click", () => {
    pre.textContent = output;
    more.remove();
  });
  return h("div", {}, pre, more);
}
