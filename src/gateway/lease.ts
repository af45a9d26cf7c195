/**
 * A reservation's lease, renewed while its request runs. If the process dies,
 * renewals stop, the lease lapses, and any instance's sweeper releases the hold.
 */
import type { Store } from '../store/types.js';

export class Lease {
  private timer: NodeJS.Timeout | null;

  private constructor(store: Store, reservationId: string, leaseMs: number) {
    this.timer = setInterval(() => {
      store.renewLease(reservationId, leaseMs).catch(() => undefined);
    }, Math.max(1, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  static start(store: Store, reservationId: string, leaseMs: number): Lease {
    return new Lease(store, reservationId, leaseMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** Releases lapsed leases (and writes lapsed earned-credit expiries) every `everyMs`. */
export function startSweeper(store: Store, everyMs: number, onError: (err: unknown) => void): () => void {
  const timer = setInterval(() => {
    store.releaseExpiredLeases().catch(onError);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
