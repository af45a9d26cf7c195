/**
 * The clocks a request runs under, as the one AbortSignal its upstream attempts
 * share: the client leaving, the whole request's deadline
 * (`routing.max_request_ms`, from its arrival), and, once an answer flows,
 * silence (`routing.stream_idle_timeout_ms`: no content or usage event for that
 * long; SSE comments and pings are not events, so they do not count).
 */
import { errors } from '../errors.js';
import { UpstreamError } from '../providers/types.js';

export type StopReason = 'client' | 'deadline' | 'idle';

export interface WatchLimits {
  /** How long the request may still run. */
  remainingMs: number;
  maxRequestMs: number;
  idleMs: number;
}

export class RequestWatch {
  private readonly controller = new AbortController();
  private readonly deadline: NodeJS.Timeout;
  private idle: NodeJS.Timeout | null = null;
  private reason: StopReason | null = null;
  private readonly onClientAbort = () => this.stop('client');

  constructor(private readonly client: AbortSignal, private readonly limits: WatchLimits) {
    this.deadline = setTimeout(() => this.stop('deadline'), Math.max(0, limits.remainingMs));
    if (client.aborted) this.stop('client');
    else client.addEventListener('abort', this.onClientAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get stopped(): StopReason | null {
    return this.reason;
  }

  /** The upstream's next event is awaited: the idle clock starts (over). */
  awaitUpstream(): void {
    if (this.idle) this.idle.refresh();
    else this.idle = setTimeout(() => this.stop('idle'), this.limits.idleMs);
  }

  /** An event arrived: the clock stops while the client takes it (a slow client is not a silent upstream). */
  upstreamAnswered(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
  }

  dispose(): void {
    clearTimeout(this.deadline);
    if (this.idle) clearTimeout(this.idle);
    this.client.removeEventListener('abort', this.onClientAbort);
  }

  /**
   * The caller's error for a failure while opening a route: this watch's
   * deadline says so in the gateway's words; anything else passes through.
   */
  explainOpening(err: unknown): unknown {
    return this.reason === 'deadline' ? this.deadlineError(err) : err;
  }

  /** The caller's error for an answer that broke off midway, in the gateway's own words (the upstream's go to the log via `cause`). */
  explainMidAnswer(err: UpstreamError) {
    switch (this.reason) {
      case 'deadline': return this.deadlineError(err);
      case 'idle': return errors.upstreamTimeout(`The upstream sent nothing for ${this.limits.idleMs} ms and was given up.`, err);
      case 'client': return errors.upstreamUnavailable('The client closed the connection.', err);
      case null: return err.failure === 'aborted'
        ? errors.upstreamUnavailable('The client closed the connection.', err)
        : errors.upstreamUnavailable('The upstream failed in the middle of the answer.', err);
    }
  }

  private stop(reason: StopReason): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.controller.abort(new UpstreamError('aborted', `stopped: ${reason}`));
  }

  private deadlineError(cause: unknown) {
    return errors.upstreamTimeout(`The request took longer than its limit of ${this.limits.maxRequestMs} ms.`, cause);
  }
}
