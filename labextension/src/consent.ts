/**
 * Consent requests as JupyterLab dialogs, beside the prompt in the calling cell.
 *
 * `ConsentDialogs` opens a dialog for each consent request that starts
 * waiting in any linked kernel (one at a time), with the same per-path,
 * per-operation choices as the cell's prompt. Whichever answers first wins:
 * when the notebook answers (or the request times out) while the dialog is
 * open, the dialog closes and a notification says how the request ended; when
 * the dialog answers, the cell's prompt shows the outcome. It decides nothing:
 * it sends the user's choice to the kernel, which narrows it to what was asked.
 */

import { Dialog, Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { BrokerModel } from './model';
import { IConsent, IConsentOutcome } from './protocol';

import { APPROVE_CLASS, DENY_CLASS, DIALOG_ID } from './tokens';

/**
 * The duration choices, as the cell's prompt offers them (`null`: this connection).
 */
const DURATIONS: [string, number | null][] = [
  ['this connection', null],
  ['15 min', 900],
  ['1 h', 3600]
];

/**
 * What the user chose in the dialog.
 */
export interface IConsentAnswer {
  approved: { path: string; operations: string[] }[];
  duration: number | null;
}

/**
 * The dialog's body: the server's reason, each path with its operations, the duration.
 */
export class ConsentBody
  extends Widget
  implements Dialog.IBodyWidget<IConsentAnswer>
{
  constructor(readonly consent: IConsent) {
    super();
    this.addClass('fsbroker-consent-body');
    const node = this.node;
    if (consent.message) {
      const message = document.createElement('p');
      message.className = 'fsbroker-consent-message';
      message.textContent = `“${consent.message}”`;
      node.appendChild(message);
    }
    const table = document.createElement('table');
    table.className = 'fsbroker-consent-paths';
    for (const item of consent.items) {
      const row = table.insertRow();
      row.className = 'fsbroker-consent-path';
      const label = row.insertCell();
      const code = document.createElement('code');
      code.textContent = item.rel ?? item.path;
      label.appendChild(code);
      if (item.readOnly) {
        label.append(' (read-only folder)');
      }
      const ops = row.insertCell();
      if (!item.approvable) {
        ops.className = 'fsbroker-muted';
        ops.textContent = `cannot be approved: ${(item.reason ?? 'refused').replace(/_/g, ' ')}`;
        continue;
      }
      const boxes: HTMLInputElement[] = [];
      for (const op of item.operations) {
        const grantable = item.grantable.includes(op);
        const box = document.createElement('input');
        box.type = 'checkbox';
        box.checked = grantable;
        box.disabled = !grantable;
        box.value = op;
        box.className = `fsbroker-consent-op fsbroker-consent-op-${op}`;
        const span = document.createElement('label');
        span.className = 'fsbroker-consent-toggle';
        span.append(box, ` ${op}`);
        ops.appendChild(span);
        boxes.push(box);
      }
      this._boxes.set(item.path, boxes);
    }
    node.appendChild(table);
    if (consent.already.length) {
      const already = document.createElement('p');
      already.className = 'fsbroker-muted';
      already.textContent = `Already granted: ${consent.already.join(', ')}`;
      node.appendChild(already);
    }
    const footer = document.createElement('div');
    footer.className = 'fsbroker-consent-footer';
    const select = document.createElement('select');
    select.className = 'fsbroker-consent-duration jp-mod-styled';
    DURATIONS.forEach(([label], index) => {
      const option = document.createElement('option');
      option.value = String(index);
      option.textContent = label;
      select.appendChild(option);
    });
    this._duration = select;
    const lasts = document.createElement('label');
    lasts.append('Grant for ', select);
    footer.appendChild(lasts);
    this._countdown.className = 'fsbroker-countdown fsbroker-muted';
    footer.appendChild(this._countdown);
    node.appendChild(footer);
    this._tick();
    this._timer = window.setInterval(() => this._tick(), 1000);
  }

  getValue(): IConsentAnswer {
    const approved: IConsentAnswer['approved'] = [];
    for (const [path, boxes] of this._boxes) {
      const operations = boxes.filter(b => b.checked).map(b => b.value);
      if (operations.length) {
        approved.push({ path, operations });
      }
    }
    const choice = DURATIONS[Number(this._duration.value)] ?? DURATIONS[0];
    return { approved, duration: choice[1] };
  }

  dispose(): void {
    window.clearInterval(this._timer);
    super.dispose();
  }

  private _tick(): void {
    const left = Math.max(
      0,
      Math.round((Date.parse(this.consent.deadline) - Date.now()) / 1000)
    );
    const seconds = String(left % 60).padStart(2, '0');
    this._countdown.textContent = `refused automatically in ${Math.floor(left / 60)}:${seconds}`;
  }

  private _boxes = new Map<string, HTMLInputElement[]>();
  private _duration: HTMLSelectElement;
  private _countdown = document.createElement('span');
  private _timer: number;
}

interface IQueued {
  model: BrokerModel;
  consent: IConsent;
}

/**
 * Opens a dialog for every consent request that waits, one at a time.
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
        this._ended(model, id, outcome);
      }
    });
    for (const consent of model.pendingConsents) {
      this._queue.push({ model, consent });
    }
    this._next();
  }

  /**
   * Open the dialog of *consent* now (the sidebar's "Answer…").
   */
  open(model: BrokerModel, consent: IConsent): void {
    if (this._open?.consent.id === consent.id) {
      return;
    }
    this._queue = this._queue.filter(q => q.consent.id !== consent.id);
    this._queue.unshift({ model, consent });
    this._next();
  }

  /**
   * The dialog shown now, if any (for tests and the sidebar).
   */
  get dialog(): Dialog<IConsentAnswer> | null {
    return this._dialog;
  }

  private _next(): void {
    if (this._open) {
      return;
    }
    const queued = this._queue.shift();
    if (!queued) {
      return;
    }
    if (!queued.model.pendingConsents.some(c => c.id === queued.consent.id)) {
      this._next(); // answered meanwhile
      return;
    }
    void this._show(queued);
  }

  private async _show(queued: IQueued): Promise<void> {
    const { model, consent } = queued;
    const where = model.label ? ` (${model.label})` : '';
    const dialog = new Dialog<IConsentAnswer>({
      title: `${consent.server} asks for access to your files${where}`,
      body: new ConsentBody(consent),
      buttons: [
        Dialog.cancelButton({ label: 'Deny', className: DENY_CLASS }),
        Dialog.okButton({ label: 'Approve', className: APPROVE_CLASS })
      ],
      hasClose: false
    });
    dialog.id = DIALOG_ID;
    dialog.addClass(DIALOG_ID);
    this._open = queued;
    this._dialog = dialog;
    this._endedElsewhere = null;
    let answer: Dialog.IResult<IConsentAnswer>;
    try {
      answer = await dialog.launch();
    } finally {
      this._open = null;
      this._dialog = null;
    }
    const elsewhere = this._endedElsewhere as {
      outcome: IConsentOutcome | null;
    } | null;
    this._endedElsewhere = null;
    if (elsewhere) {
      const text = elsewhere.outcome
        ? `${consent.server}: ${elsewhere.outcome.text}${
            elsewhere.outcome.answeredBy === 'notebook'
              ? ' (answered in the notebook)'
              : ''
          }`
        : `${consent.server}: the request no longer waits.`;
      Notification.info(text, { autoClose: 8000 });
    } else {
      const approved =
        answer.button.accept && answer.value ? answer.value.approved : [];
      const duration = answer.value?.duration ?? null;
      const result = await model.answerConsent(consent.id, approved, duration);
      if (!result.ok) {
        Notification.warning(`${consent.server}: ${result.message}`, {
          autoClose: 8000
        });
      }
    }
    this._next();
  }

  private _ended(
    model: BrokerModel,
    id: string,
    outcome: IConsentOutcome | null
  ): void {
    this._queue = this._queue.filter(q => q.consent.id !== id);
    if (this._open?.consent.id === id && this._dialog) {
      this._endedElsewhere = { outcome };
      this._dialog.reject();
    }
  }

  private _queue: IQueued[] = [];
  private _open: IQueued | null = null;
  private _dialog: Dialog<IConsentAnswer> | null = null;
  private _endedElsewhere: { outcome: IConsentOutcome | null } | null = null;
}
