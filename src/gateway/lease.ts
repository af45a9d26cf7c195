/**
 * Reservation leases, renewed while their requests run. If the process dies,
 * renewals stop, the leases lapse, and any instance's sweeper closes the holds:
 * each renewal records what the request has delivered so far, so the sweeper
 * settles that (delivered content is paid for) and releases the rest.
 *
 * One keeper per process (per app): one timer, at a third of the lease, renews
 * every lease it holds with one store call, one statement, however many
 * requests are in flight.
 */
import type { Delivered, LeaseRenewal, Store } from '../store/types.js';

export class LeaseKeeper {
  private readonly leases = new Map<string, Lease>();
  private timer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly store: Store,
    readonly leaseMs: number,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  /** A lease on a reservation just taken, renewed from now on until `stop()`. */
  start(reservationId: string): Lease {
    const lease = new Lease(this.store, reservationId, this.leaseMs, () => this.forget(lease));
    if (this.closed) return lease;
    this.leases.set(reservationId, lease);
    if (!this.timer) {
      this.timer = setInterval(() => void this.renewAll(), Math.max(1, Math.floor(this.leaseMs / 3)));
      this.timer.unref();
    }
    return lease;
  }

  /** How many leases are renewed on each tick. */
  get size(): number {
    return this.leases.size;
  }

  /**
   * Renews every lease held, in one store call; those no longer held (settled,
   * released, swept) are let go. A tick that finds the last renewal still under
   * way leaves it at that one.
   */
  renewAll(): Promise<void> {
    if (this.renewing) return this.renewing;
    if (this.leases.size === 0) return Promise.resolve();
    const leases = [...this.leases.values()];
    const renewals = leases.map((lease) => this.renewalOf(lease));
    this.renewing = this.store.renewLeases(renewals).then(
      (held) => {
        for (const lease of leases) if (!held.has(lease.reservationId)) this.forget(lease);
      },
      (err: unknown) => this.onError(err),
    ).finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  /** Stops the timer and lets every lease go (the app is closing). */
  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.leases.clear();
  }

  /** A lease whose record of delivery fails is still renewed, recording nothing new this time. */
  private renewalOf(lease: Lease): LeaseRenewal {
    try {
      return lease.renewal();
    } catch (err) {
      this.onError(err);
      return { reservationId: lease.reservationId, leaseMs: this.leaseMs, delivered: null };
    }
  }

  private forget(lease: Lease): void {
    if (this.leases.get(lease.reservationId) === lease) this.leases.delete(lease.reservationId);
  }
}

/** One reservation's lease, renewed by its keeper until stopped. */
export class Lease {
  private delivered: () => Delivered | null = () => null;

  constructor(
    private readonly store: Store,
    readonly reservationId: string,
    private readonly leaseMs: number,
    private readonly onStop: () => void,
  ) {}

  /** From now on each renewal records what `delivered` says has reached the client. */
  track(delivered: () => Delivered | null): void {
    this.delivered = delivered;
  }

  /** What the next renewal writes for this lease. */
  renewal(): LeaseRenewal {
    return { reservationId: this.reservationId, leaseMs: this.leaseMs, delivered: this.delivered() };
  }

  /** Renews this one lease at once, recording what was delivered; false when the reservation is no longer held. */
  renew(): Promise<boolean> {
    return this.store.renewLease(this.reservationId, this.leaseMs, this.delivered());
  }

  stop(): void {
    this.onStop();
  }
}

/**
 * Every `everyMs`: closes lapsed leases (and writes lapsed earned-credit
 * expiries), and prunes Idempotency-Key records past their 24 h.
 */
export function startSweeper(store: Store, everyMs: number, onError: (err: unknown) => void): () => void {
  const timer = setInterval(() => {
    store.releaseExpiredLeases().catch(onError);
    store.pruneIdempotencyKeys().catch(onError);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
