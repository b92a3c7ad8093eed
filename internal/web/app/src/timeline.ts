// Timeline: one session's transcript, newest page first, older pages
// fetched as you scroll up (and newer ones as you scroll back down: at most
// KEEP pages are drawn at once), new messages live from WatchSession; the
// header panel moves the session (switch, fork, hand off) and the
// composer sends, interrupts and answers permissions.
import { BAD_PAGE_TOKEN, errorText, heals, isAbort, reasonOf, requestId, sessions } from "./api";
import { ago, h, say, unsay } from "./dom";
import { MessageKind, SessionState, type Message, type Session } from "./gen/cast/v1/session_pb";
import type { WatchSessionResponse } from "./gen/cast/v1/session_service_pb";
import { agentList, date, displayName, lineage, stateClass, stateLabel } from "./labels";
import { setCommands } from "./palette";

const PAGE = 200; // messages per page fetched
const KEEP = 3; // pages drawn at once: a session of any length keeps at most this many in the page
const FOLD = 2000; // characters of a tool output shown before "show all"
// The live watch's pauses between streams (ms): doubling from RETRY_MIN
// to RETRY_MAX (±20%, never past it) while the control plane stays away
// (a restart takes seconds), back to RETRY_MIN after a stream that worked
// (delivered a message, or stayed up STABLE), as `cast watch` does.
const RETRY_MIN = 250;
const RETRY_MAX = 4000;
const STABLE = 5000;
const RECONNECTING = "Live updates lost; reconnecting…";

export async function timeline(main: HTMLElement, id: string, signal: AbortSignal): Promise<void> {
  let sess = await sessions.getSession({ sessionId: id }, { signal });
  const view = new View(main, sess, signal);
  await view.panel();
  const last = sess.lastSeq;
  view.newest = last;
  const from = bigMax(1n, last - BigInt(PAGE) + 1n);
  if (last > 0n) view.add(await readRange(id, from, last, signal), "end", from, last);
  view.scrollToEnd();
  // A page more as either sentinel comes into view; pages past KEEP are
  // dropped at the other end, so the drawn rows stay bounded.
  const io = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting) void view.more(id, e.target === view.older ? "start" : "end");
  });
  io.observe(view.older);
  io.observe(view.newer);
  signal.addEventListener("abort", () => io.disconnect());
  // Live: from the seq after the newest shown; the stream also carries
  // every change of the session record.
  follow(id, last + 1n, signal, (ev) => {
    if (ev.event.case === "message") view.live(ev.event.value);
    if (ev.event.case === "session") {
      sess = ev.event.value;
      view.update(sess);
    }
  }).catch((err: unknown) => say("Live updates stopped: " + errorText(err), true));
}

// follow hands on each event of the session's watch from seq next for as
// long as the page shows it. A stream that ends in a way that heals (the
// control plane restarting, the server ending the watch, the network
// dropping) is opened again from the seq after the newest message handed
// on, so none is handed on twice or skipped, after a pause that doubles
// while the streams keep failing. It returns when signal fires, and
// throws what does not heal (the session gone or not the caller's, the
// browser signed out).
async function follow(id: string, next: bigint, signal: AbortSignal, on: (ev: WatchSessionResponse) => void): Promise<void> {
  for (let pause = RETRY_MIN; ; pause = Math.min(2 * pause, RETRY_MAX)) {
    const opened = Date.now();
    let worked = false; // delivered a message: the control plane is back
    try {
      for await (const ev of sessions.watchSession({ sessionId: id, startSeq: next }, { signal })) {
        if (ev.event.case === "message") {
          if (ev.event.value.seq < next) continue; // handed on before a reconnect
          next = ev.event.value.seq + 1n;
          worked = true;
        }
        unsay(RECONNECTING);
        on(ev);
      }
    } catch (err) {
      if (!signal.aborted && !heals(err)) throw err;
    }
    if (signal.aborted) return;
    // A stream that worked ended: the next pause starts short again. (Each
    // stream's first event is the session, so a server ending every
    // stream at once does not count as working.)
    if (worked || Date.now() - opened >= STABLE) pause = RETRY_MIN;
    say(RECONNECTING);
    await sleep(Math.min(RETRY_MAX, pause * (0.8 + 0.4 * Math.random())), signal);
  }
}

// sleep waits ms, or until signal fires.
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const stop = () => (clearTimeout(timer), done());
    const timer = setTimeout(() => (signal.removeEventListener("abort", stop), done()), ms);
    signal.addEventListener("abort", stop, { once: true });
  });
}

// readRange reads the messages start..end, following page tokens (pages
// are bounded in bytes too, so any page may stop short of end). A token
// expires when the store is compacted past the revision it reads at (the
// hourly compaction, or NOSPACE recovery): stored messages never change,
// so the rest of the range reads the same from a fresh first page after
// the last message read, as the CLI's pager does (client.EachMessage).
async function readRange(id: string, start: bigint, end: bigint, signal: AbortSignal): Promise<Message[]> {
  const out: Message[] = [];
  for (let pageToken = ""; ; ) {
    let r;
    try {
      r = await sessions.listMessages({ sessionId: id, startSeq: start, endSeq: end, pageSize: PAGE, pageToken }, { signal });
    } catch (err) {
      // A token's refusal only: a first page refused stays refused.
      if (!pageToken || reasonOf(err) !== BAD_PAGE_TOKEN) throw err;
      if (out.length) start = out[out.length - 1].seq + 1n;
      pageToken = "";
      continue;
    }
    out.push(...r.messages);
    pageToken = r.nextPageToken;
    if (!pageToken) return out;
  }
}

function bigMax(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

function bigMin(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

// A page is a range of seqs fetched together and the rows drawn for it
// (fewer than its messages: results fold into their calls, internal rows
// are never drawn).
interface Page {
  from: bigint;
  to: bigint;
  rows: HTMLElement[];
}

class View {
  readonly older = h("div", { class: "older muted" }, "Loading older messages…");
  readonly newer = h("div", { class: "older muted" }, "Loading newer messages…");
  // newest is the newest seq the session has (drawn or not).
  newest = 0n;
  private readonly list = h("ol", { class: "timeline", "aria-label": "Messages" });
  private readonly scroller = h("div", { class: "scroller", tabindex: 0, "aria-label": "Transcript" }, this.older, this.list, this.newer);
  private pages: Page[] = [];
  private loading = false;
  private readonly head = h("section", { class: "panel", "aria-label": "Session" });
  private readonly perm = h("div", { class: "permission", role: "region", "aria-label": "Permission" });
  private readonly forks = h("ul", { class: "forks", "aria-label": "Forks made here" });
  private readonly seen = new Set<bigint>();
  private readonly calls = new Map<string, HTMLElement>();
  // results drawn, by call id: merged into their call's row, or a row of
  // their own (the call was in a page not drawn yet).
  private readonly results = new Map<string, { m: Message; merged: boolean }>();
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
      h(
        "p",
        { class: "verbs" },
        verb("Archive", "Hide it from the inbox and close it to new messages (cast rm; kept, not deleted)", () => this.archive()),
      ),
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
        { label: "Archive this session", run: () => this.archive() },
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

  // archive hides the session from the inbox and closes it to new
  // messages; nothing is deleted (`cast rm` without --purge).
  async archive(): Promise<void> {
    try {
      await sessions.deleteSession({ sessionId: this.sess.id });
      say(`Archived ${this.sess.id}: \`cast ls --all\` still lists it.`);
      location.hash = "#/";
    } catch (err) {
      say("Archive refused: " + errorText(err), true);
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

  private first(): bigint {
    return this.pages.length ? this.pages[0].from : this.newest + 1n;
  }

  private last(): bigint {
    return this.pages.length ? this.pages[this.pages.length - 1].to : this.newest;
  }

  // more draws the page before the first drawn or after the last.
  async more(id: string, where: "start" | "end"): Promise<void> {
    if (this.loading) return;
    const [from, to] =
      where === "start"
        ? [bigMax(1n, this.first() - BigInt(PAGE)), this.first() - 1n]
        : [this.last() + 1n, bigMin(this.newest, this.last() + BigInt(PAGE))];
    if (to < from) return;
    this.loading = true;
    try {
      this.add(await readRange(id, from, to, this.signal), where, from, to);
    } catch (err) {
      if (!isAbort(err)) say(errorText(err), true);
    } finally {
      this.loading = false;
    }
  }

  // live takes a message from the stream: drawn when the newest page is,
  // else left for the newer sentinel to fetch.
  live(m: Message): void {
    const drawnToEnd = this.last() >= this.newest;
    this.newest = bigMax(this.newest, m.seq);
    if (!drawnToEnd) return this.sentinels();
    const follow = this.atEnd();
    const tail = this.pages[this.pages.length - 1];
    if (tail && tail.rows.length < PAGE) {
      const row = this.draw([m]);
      tail.to = bigMax(tail.to, m.seq);
      tail.rows.push(...row);
      this.list.append(...row);
    } else {
      this.add([m], "end", m.seq, m.seq);
    }
    this.sentinels();
    if (follow) this.scrollToEnd();
  }

  // add draws msgs (the seqs from..to) as a page at one end, and drops
  // the page at the other end past KEEP, keeping what the reader sees
  // where it is.
  add(msgs: Message[], where: "start" | "end", from?: bigint, to?: bigint): void {
    const page: Page = { from: from ?? msgs[0]?.seq ?? 1n, to: to ?? msgs[msgs.length - 1]?.seq ?? 0n, rows: this.draw(msgs) };
    if (where === "start") {
      this.steady(this.list.firstElementChild, () => this.list.prepend(...page.rows));
      this.pages.unshift(page);
      if (this.pages.length > KEEP) this.drop(this.pages.pop()!);
    } else {
      this.list.append(...page.rows);
      this.pages.push(page);
      if (this.pages.length > KEEP) {
        const gone = this.pages.shift()!;
        this.steady(this.pages[0].rows[0] ?? null, () => this.drop(gone));
      }
    }
    this.sentinels();
  }

  private draw(msgs: Message[]): HTMLElement[] {
    const rows: HTMLElement[] = [];
    for (const m of msgs) {
      if (this.seen.has(m.seq)) continue;
      this.seen.add(m.seq);
      const el = this.render(m);
      if (el) rows.push(el);
    }
    return rows;
  }

  // drop takes a page's rows out of the document; its messages are
  // fetched again when the reader scrolls back to them.
  private drop(p: Page): void {
    for (const r of p.rows) r.remove();
    for (let seq = p.from; seq <= p.to; seq++) this.seen.delete(seq);
    for (const [id, body] of this.calls) if (!body.isConnected) this.calls.delete(id);
    for (const [id, r] of this.results) if (r.m.seq >= p.from && r.m.seq <= p.to) this.results.delete(id);
  }

  private sentinels(): void {
    this.older.hidden = this.first() <= 1n;
    this.newer.hidden = this.last() >= this.newest;
  }

  // steady runs change without moving anchor on the screen: rows added
  // above or taken away above would otherwise shift what the reader sees.
  // The transcript's box scrolls on a wide screen, the page on a phone.
  private steady(anchor: Element | null, change: () => void): void {
    const top = anchor?.getBoundingClientRect().top;
    change();
    if (!anchor || top === undefined || !anchor.isConnected) return;
    const d = anchor.getBoundingClientRect().top - top;
    if (!d) return;
    const before = this.scroller.scrollTop;
    this.scroller.scrollTop += d;
    if (this.scroller.scrollTop === before) window.scrollBy(0, d);
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
        // Its result drawn already, in a page read before this one.
        const done = this.results.get(call.id);
        if (done) this.settle(body, done.m, done.merged);
        return li;
      }
      case MessageKind.TOOL_RESULT: {
        const r = m.toolResult!;
        const body = this.calls.get(r.callId);
        this.results.set(r.callId, { m, merged: !!body });
        if (body) {
          this.settle(body, m, true);
          return null;
        }
        return h("li", { class: "msg tool", "data-seq": String(m.seq) }, h("details", {}, h("summary", {}, "Tool result"), fold(r.output, r.isError), this.images(m)));
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

  // settle marks a call's row done or failed by its result m, with the
  // result's output inside when it has no row of its own (merged).
  private settle(body: HTMLElement, m: Message, merged: boolean): void {
    const r = m.toolResult!;
    if (merged && body.dataset.result !== String(m.seq)) {
      body.append(fold(r.output, r.isError), this.images(m));
      body.dataset.result = String(m.seq); // drawn again after its page left: once
    }
    const st = body.parentElement?.querySelector(".tool-state");
    if (st) st.textContent = r.isError ? " · failed" : " · done";
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
