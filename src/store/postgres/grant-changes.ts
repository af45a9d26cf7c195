/**
 * What a PostgreSQL metering transaction does to the grants it locked, worked
 * out in JS from their locked (current) rows, then written by one statement
 * (metering-sql.ts) whose guards check every change again in SQL. The rules
 * are those of src/store/sqlite/metering.ts.
 */
import type { Argument } from './database.js';

/** A locked grant, in spending order; `own`: the hold of the reservation being closed on it. */
export interface LockedGrant {
  id: string;
  kind: 'earned' | 'purchased';
  balance: number;
  held: number;
  expires_at: number | null;
  own: number;
}

interface Change {
  take: number;
  own: number;
  charge: number;
  expire: number;
}

interface Entry {
  grant: string | null;
  entry: 'charge' | 'expire' | 'shortfall';
  amount: number;
  reservation: string | null;
  shortfall: number;
}

export function unexpired(g: LockedGrant, now: number): boolean {
  return g.expires_at === null || g.expires_at > now;
}

/** The changes of one transaction, kept per grant, and its ledger entries in order. */
export class GrantChanges {
  private readonly changes = new Map<string, Change>();
  private readonly entries: Entry[] = [];

  constructor(private readonly grants: readonly LockedGrant[], private readonly now: number) {}

  private of(id: string): Change {
    let change = this.changes.get(id);
    if (!change) {
      change = { take: 0, own: 0, charge: 0, expire: 0 };
      this.changes.set(id, change);
    }
    return change;
  }

  take(id: string, amount: number): void {
    this.of(id).take += amount;
  }

  /** Lifts a hold of `own` and charges `charge` (which may be 0). */
  charge(id: string, own: number, charge: number): void {
    const change = this.of(id);
    change.own += own;
    change.charge += charge;
  }

  ledger(entry: Entry): void {
    this.entries.push(entry);
  }

  /** A grant's balance and held once the changes so far apply. */
  after(g: LockedGrant): { balance: number; held: number } {
    const c = this.changes.get(g.id);
    return c ? { balance: g.balance - c.charge - c.expire, held: g.held + c.take - c.own } : { balance: g.balance, held: g.held };
  }

  /** Earned credits past their expiry are gone, all but what holds still keep; answers how many grants lapsed. */
  expireLapsed(): number {
    let lapsed = 0;
    for (const g of this.grants) {
      if (g.kind !== 'earned' || unexpired(g, this.now)) continue;
      const { balance, held } = this.after(g);
      if (balance <= held) continue;
      this.of(g.id).expire += balance - held;
      this.entries.push({ grant: g.id, entry: 'expire', amount: held - balance, reservation: null, shortfall: 0 });
      lapsed++;
    }
    return lapsed;
  }

  /** What the account owns once the changes apply, among the locked grants (those with a balance). */
  owned(): number {
    return this.grants.reduce((sum, g) => {
      const { balance, held } = this.after(g);
      return sum + (unexpired(g, this.now) ? balance : held);
    }, 0);
  }

  get grantCount(): number {
    return this.changes.size;
  }

  get entryCount(): number {
    return this.entries.length;
  }

  /** The ten array parameters ($3..$12) of the writing statements. */
  parameters(): Argument[] {
    const ids = [...this.changes.keys()];
    const changes = [...this.changes.values()];
    return [
      ids, changes.map((c) => c.take), changes.map((c) => c.own), changes.map((c) => c.charge), changes.map((c) => c.expire),
      this.entries.map((e) => e.grant), this.entries.map((e) => e.entry), this.entries.map((e) => e.amount),
      this.entries.map((e) => e.reservation), this.entries.map((e) => e.shortfall),
    ];
  }
}
