/**
 * A reservation's lease, renewed while its request runs. If the process dies,
 * renewals stop, the lease lapses, and any instance's sweeper closes the hold:
 * each renewal records what the request has delivered so far, so the sweeper
 * settles that (delivered content is paid for) and releases the rest.
 */
import type { Delivered, Store } from '../store/types.js';

export class Lease {
  private timer: NodeJS.Timeout | null;
  private delivered: () => Delivered | null = () => null;

  private constructor(private readonly store: Store, private readonly reservationId: string, private readonly leaseMs: number) {
    this.timer = setInterval(() => {
      this.renew().catch(() => undefined);
    }, Math.max(1, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  static start(store: Store, reservationId: string, leaseMs: number): Lease {
    return new Lease(store, reservationId, leaseMs);
  }

  /** From now on each renewal records what `delivered` says has reached the client. */
  track(delivered: () => Delivered | null): void {
    this.delivered = delivered;
  }

  /** Renews at once, recording what was delivered; false when the reservation is no longer held. */
  renew(): Promise<boolean> {
    return this.store.renewLease(this.reservationId, this.leaseMs, this.delivered());
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
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
