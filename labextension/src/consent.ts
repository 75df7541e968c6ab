/**
 * Consent requests as a panel beside the notebook, with the prompt in the calling cell.
 *
 * `ConsentDialogs` shows each consent request that starts waiting in any
 * linked kernel (one at a time) in a non-modal panel: the menus, Kernel →
 * Interrupt included, stay usable while it is open. It offers the same
 * controls as the cell's prompt: a checkbox per path and per operation (the
 * destructive ones marked and unticked), what each path covers, the same
 * duration buttons, Approve (disabled while nothing is ticked) and Deny. Its
 * close button and Esc mean "answer later": the panel hides, the status badge
 * and the cell's prompt stay, and the sidebar's "Answer…" shows it again.
 *
 * Whichever answers first wins: when the notebook answers (or the request
 * times out) while the panel is open, it closes and a notification says how
 * the request ended; when the panel answers, the cell's prompt shows the
 * outcome. It decides nothing: it sends the user's choice to the kernel,
 * which narrows it to what was asked.
 */

import { Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { BrokerModel } from './model';
import { IConsent, IConsentItem, IConsentOutcome, Operation } from './protocol';

import { APPROVE_CLASS, DENY_CLASS, DIALOG_ID } from './tokens';

/**
 * The duration choices, as the cell's prompt offers them (`null`: until the connection is disconnected).
 */
export function durations(consent: IConsent): [string, number | null][] {
  return [
    [consent.untilDisconnect ?? `until you disconnect ${consent.server}`, null],
    ['15 min', 900],
    ['1 h', 3600]
  ];
}

/** The class of the panel's close button ("answer later"). */
export const LATER_CLASS = 'fsbroker-dialog-later';

/** The class of an operation that can destroy data. */
export const DESTRUCTIVE_CLASS = 'fsbroker-destructive';

/**
 * What the user chose in the panel.
 */
export interface IConsentAnswer {
  approved: { path: string; operations: string[] }[];
  duration: number | null;
}

/**
 * How the panel was left: an answer, "answer later", or the request ended elsewhere.
 */
type Leaving =
  | { kind: 'answer'; answer: IConsentAnswer }
  | { kind: 'later' }
  | { kind: 'ended'; outcome: IConsentOutcome | null };

interface IPathControls {
  item: IConsentItem;
  path: HTMLInputElement;
  ops: HTMLInputElement[];
}

/**
 * The panel's body: who asks and why, each path with its operations, the duration, the answers.
 */
export class ConsentBody extends Widget {
  constructor(
    readonly consent: IConsent,
    private readonly _leave: (how: Leaving) => void
  ) {
    super();
    this.addClass('fsbroker-consent-body');
    const node = this.node;
    const header = document.createElement('div');
    header.className = 'fsbroker-consent-header';
    const title = document.createElement('h2');
    title.className = 'fsbroker-consent-title';
    const who = document.createElement('b');
    who.textContent = consent.server;
    title.append(who, ' asks for access to your files');
    if (consent.asker?.text) {
      const details = document.createElement('div');
      details.className = 'fsbroker-consent-who fsbroker-muted';
      details.textContent = consent.asker.text;
      title.appendChild(details);
    }
    const later = document.createElement('button');
    later.type = 'button';
    later.className = `${LATER_CLASS} jp-Button jp-mod-minimal`;
    later.title =
      'Answer later (Esc): the request keeps waiting in the cell and the sidebar';
    later.setAttribute('aria-label', 'Answer later');
    later.textContent = '×';
    later.addEventListener('click', () => this._leave({ kind: 'later' }));
    header.append(title, later);
    node.appendChild(header);
    if (consent.message) {
      const message = document.createElement('p');
      message.className = 'fsbroker-consent-message';
      message.textContent = `“${consent.message}”`;
      node.appendChild(message);
    }
    const table = document.createElement('table');
    table.className = 'fsbroker-consent-paths';
    for (const item of consent.items) {
      this._row(table, item);
    }
    node.appendChild(table);
    if (consent.already.length) {
      const already = document.createElement('p');
      already.className = 'fsbroker-muted';
      already.textContent = `Already granted (not asked again): ${consent.already.join(', ')}`;
      node.appendChild(already);
    }
    const lasts = document.createElement('div');
    lasts.className = 'fsbroker-consent-duration';
    lasts.append('For: ');
    durations(consent).forEach(([label, seconds], index) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'fsbroker-consent-duration-choice jp-Button';
      button.textContent = label;
      button.setAttribute('aria-pressed', String(index === 0));
      button.addEventListener('click', () => {
        this._duration = seconds;
        for (const other of this._durationButtons) {
          other.setAttribute('aria-pressed', String(other === button));
        }
      });
      this._durationButtons.push(button);
      lasts.appendChild(button);
    });
    node.appendChild(lasts);
    const footer = document.createElement('div');
    footer.className = 'fsbroker-consent-footer';
    this._approve.type = 'button';
    this._approve.className = `${APPROVE_CLASS} jp-Dialog-button jp-mod-accept jp-mod-styled`;
    this._approve.textContent = 'Approve';
    this._approve.title = 'Grant what is ticked';
    this._approve.addEventListener('click', () => {
      const answer = this.getValue();
      if (answer.approved.length) {
        this._leave({ kind: 'answer', answer });
      }
    });
    const deny = document.createElement('button');
    deny.type = 'button';
    deny.className = `${DENY_CLASS} jp-Dialog-button jp-mod-reject jp-mod-styled`;
    deny.textContent = 'Deny';
    deny.title = 'Grant nothing';
    deny.addEventListener('click', () =>
      this._leave({ kind: 'answer', answer: { approved: [], duration: null } })
    );
    this._countdown.className = 'fsbroker-countdown fsbroker-muted';
    const answers = document.createElement('span');
    answers.className = 'fsbroker-consent-answers';
    answers.append(deny, this._approve);
    footer.append(this._countdown, answers);
    node.appendChild(footer);
    this._changed();
    this._tick();
    this._timer = window.setInterval(() => this._tick(), 1000);
  }

  /**
   * The paths and operations ticked, and the duration chosen.
   */
  getValue(): IConsentAnswer {
    const approved: IConsentAnswer['approved'] = [];
    for (const { item, path, ops } of this._controls) {
      const operations = ops.filter(b => b.checked).map(b => b.value);
      if (path.checked && operations.length) {
        approved.push({ path: item.path, operations });
      }
    }
    return { approved, duration: this._duration };
  }

  /**
   * The Approve button (disabled while nothing is ticked).
   */
  get approveButton(): HTMLButtonElement {
    return this._approve;
  }

  dispose(): void {
    window.clearInterval(this._timer);
    super.dispose();
  }

  private _row(table: HTMLTableElement, item: IConsentItem): void {
    const row = table.insertRow();
    row.className = 'fsbroker-consent-path';
    const label = row.insertCell();
    label.className = 'fsbroker-consent-path-label';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.className = 'fsbroker-consent-path-box';
    box.checked = item.approvable;
    box.disabled = !item.approvable;
    const name = document.createElement('label');
    const code = document.createElement('code');
    code.textContent = item.rel ?? item.path;
    name.append(box, ' ', code);
    if (item.location) {
      name.title = item.location; // the real location on hover, as in the cell
    }
    label.appendChild(name);
    const facts = this._facts(item);
    if (facts) {
      const note = document.createElement('div');
      note.className = 'fsbroker-consent-covers fsbroker-muted';
      note.textContent = facts;
      label.appendChild(note);
    }
    const ops = row.insertCell();
    ops.className = 'fsbroker-consent-ops';
    if (!item.approvable) {
      ops.classList.add('fsbroker-muted');
      ops.textContent = `cannot be approved: ${(item.reason ?? 'refused').replace(/_/g, ' ')}`;
      return;
    }
    const boxes: HTMLInputElement[] = [];
    const ticked = item.ticked ?? item.grantable;
    const destructive = item.destructive ?? [];
    for (const op of item.operations) {
      const grantable = item.grantable.includes(op);
      const opBox = document.createElement('input');
      opBox.type = 'checkbox';
      opBox.checked = grantable && ticked.includes(op);
      opBox.disabled = !grantable;
      opBox.value = op;
      opBox.className = `fsbroker-consent-op fsbroker-consent-op-${op}`;
      const span = document.createElement('label');
      span.className = 'fsbroker-consent-toggle';
      span.append(opBox, ` ${op}`);
      if (destructive.includes(op)) {
        opBox.classList.add(DESTRUCTIVE_CLASS);
        span.classList.add(DESTRUCTIVE_CLASS);
        span.title = `${op} can destroy data: tick it only if you mean it`;
        span.append(' ⚠');
      }
      opBox.addEventListener('change', () => this._changed());
      ops.appendChild(span);
      boxes.push(opBox);
    }
    box.addEventListener('change', () => this._changed());
    this._controls.push({ item, path: box, ops: boxes });
  }

  /**
   * What the path covers and what its operations do, as the cell's prompt says it.
   */
  private _facts(item: IConsentItem): string {
    if (!item.approvable) {
      return '';
    }
    const parts: string[] = [];
    if (item.covers) {
      parts.push(item.covers);
    }
    if (item.readOnly) {
      const dropped = item.operations.filter(
        op => op === 'write' || op === 'delete'
      );
      parts.push(
        dropped.length
          ? `read-only folder: ${dropped.join(' and ')} will not be granted here`
          : 'read-only folder'
      );
    }
    const destructive = item.destructive ?? [];
    for (const op of item.grantable) {
      const effect = item.effects?.[op as Operation];
      const mark = destructive.includes(op)
        ? ' — destructive, starts unticked'
        : '';
      if (effect || mark) {
        parts.push(`${op}: ${effect || 'destroys data'}${mark}`);
      }
    }
    return parts.join('; ');
  }

  private _changed(): void {
    this._approve.disabled = this.getValue().approved.length === 0;
  }

  private _tick(): void {
    const left = Math.max(
      0,
      Math.round((Date.parse(this.consent.deadline) - Date.now()) / 1000)
    );
    const seconds = String(left % 60).padStart(2, '0');
    this._countdown.textContent = `refused automatically in ${Math.floor(left / 60)}:${seconds}`;
  }

  private _controls: IPathControls[] = [];
  private _duration: number | null = null;
  private _durationButtons: HTMLButtonElement[] = [];
  private _approve = document.createElement('button');
  private _countdown = document.createElement('span');
  private _timer: number;
}

/**
 * The non-modal panel that holds one request's body (DOM id `fsbroker-consent-dialog`).
 */
class ConsentPanel extends Widget {
  constructor(consent: IConsent, leave: (how: Leaving) => void) {
    super();
    this.id = DIALOG_ID;
    this.addClass(DIALOG_ID);
    this.node.setAttribute('role', 'dialog');
    this.node.setAttribute('aria-modal', 'false');
    this.node.setAttribute(
      'aria-label',
      `${consent.server} asks for access to your files`
    );
    // Focusable itself, so that the panel takes the focus without putting it on Approve.
    this.node.tabIndex = -1;
    this.body = new ConsentBody(consent, leave);
    this.node.appendChild(this.body.node);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        leave({ kind: 'later' });
      }
    });
  }

  dispose(): void {
    this.body.dispose();
    super.dispose();
  }

  readonly body: ConsentBody;
}

interface IQueued {
  model: BrokerModel;
  consent: IConsent;
}

/**
 * Shows every consent request that waits, one at a time, in a non-modal panel.
 */
export class ConsentDialogs {
  /**
   * Show the requests of *model* from now on.
   */
  watch(model: BrokerModel): void {
    model.consentsAdded.connect((_, consents) => {
      for (const consent of consents) {
        this._queue.push({ model, consent });
      }
      this._next();
    });
    model.consentsEnded.connect((_, ended) => {
      for (const { id, outcome } of ended) {
        this._ended(id, outcome);
      }
    });
    for (const consent of model.pendingConsents) {
      this._queue.push({ model, consent });
    }
    this._next();
  }

  /**
   * Show the panel of *consent* now (the sidebar's "Answer…"), also one put off for later.
   */
  open(model: BrokerModel, consent: IConsent): void {
    this._later.delete(consent.id);
    if (this._open?.consent.id === consent.id) {
      this._panel?.node.focus();
      return;
    }
    this._queue = this._queue.filter(q => q.consent.id !== consent.id);
    this._queue.unshift({ model, consent });
    if (this._open) {
      // The request shown now goes back to the queue, after the one asked for.
      this._queue.splice(1, 0, this._open);
      this._leave({ kind: 'later', requeue: true });
      return;
    }
    this._next();
  }

  /**
   * The panel shown now, if any (for tests and the sidebar).
   */
  get panel(): Widget | null {
    return this._panel;
  }

  private _next(): void {
    if (this._open) {
      return;
    }
    let queued = this._queue.shift();
    while (
      queued &&
      (this._later.has(queued.consent.id) ||
        !queued.model.pendingConsents.some(c => c.id === queued!.consent.id))
    ) {
      queued = this._queue.shift(); // put off for later, or answered meanwhile
    }
    if (!queued) {
      return;
    }
    this._show(queued);
  }

  private _show(queued: IQueued): void {
    const panel = new ConsentPanel(queued.consent, how => this._leave(how));
    this._open = queued;
    this._panel = panel;
    Widget.attach(panel, document.body);
    panel.node.focus();
  }

  private _leave(how: Leaving | { kind: 'later'; requeue: true }): void {
    const queued = this._open;
    const panel = this._panel;
    if (!queued || !panel) {
      return;
    }
    this._open = null;
    this._panel = null;
    panel.dispose();
    const { model, consent } = queued;
    if (how.kind === 'later') {
      if (!('requeue' in how)) {
        this._later.add(consent.id);
      }
    } else if (how.kind === 'ended') {
      const outcome = how.outcome;
      const text = outcome
        ? `${consent.server}: ${outcome.text}${
            outcome.answeredBy === 'notebook'
              ? ' (answered in the notebook)'
              : ''
          }`
        : `${consent.server}: the request no longer waits.`;
      Notification.info(text, { autoClose: 8000 });
    } else {
      void this._answer(model, consent, how.answer);
    }
    this._next();
  }

  private async _answer(
    model: BrokerModel,
    consent: IConsent,
    answer: IConsentAnswer
  ): Promise<void> {
    const result = await model.answerConsent(
      consent.id,
      answer.approved,
      answer.duration
    );
    if (!result.ok) {
      Notification.warning(`${consent.server}: ${result.message}`, {
        autoClose: 8000
      });
    }
  }

  private _ended(id: string, outcome: IConsentOutcome | null): void {
    this._queue = this._queue.filter(q => q.consent.id !== id);
    this._later.delete(id);
    if (this._open?.consent.id === id) {
      this._leave({ kind: 'ended', outcome });
    }
  }

  private _queue: IQueued[] = [];
  private _later = new Set<string>();
  private _open: IQueued | null = null;
  private _panel: ConsentPanel | null = null;
}
