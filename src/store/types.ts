/**
 * The storage interface. Asynchronous at the boundary so that a networked
 * database (PostgreSQL) can implement it; every money-moving method is one short
 * transaction, and no method waits on anything but the database inside it.
 */
export type Environment = 'live' | 'test';
export type CreditKind = 'earned' | 'purchased';

export interface Account {
  id: string;
  name: string | null;
  createdAt: Date;
}

export interface Grant {
  id: string;
  accountId: string;
  kind: CreditKind;
  amount: number;
  expiresAt: Date | null;
  createdAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  name: string | null;
  environment: Environment;
  dailyCreditLimit: number | null;
  /** Requests per minute this key may make, across every instance; null = no limit. */
  rateLimitRpm: number | null;
  redactedKey: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  creditsSpentToday: number;
}

/** What authentication needs: the record plus the salted hash. */
export interface StoredApiKey extends ApiKeyRecord {
  salt: string;
  hash: string;
}

export interface NewApiKey {
  id: string;
  accountId: string;
  name: string | null;
  environment: Environment;
  dailyCreditLimit: number | null;
  rateLimitRpm: number | null;
  redactedKey: string;
  salt: string;
  hash: string;
}

export interface Balances {
  earned: number;
  purchased: number;
  /** Soonest expiry among earned grants that still hold credits. */
  earnedExpiresAt: Date | null;
  /** Held by reservations in flight. */
  reserved: number;
}

/** What a reservation may draw on, read inside the reserving transaction. */
export interface Funds {
  /** Owned, unexpired credits not held by other requests. */
  available: number;
  /** Credits the key may still take today; null when the key has no cap. */
  capRemaining: number | null;
}

export type ReservationDecision =
  | { ok: true; amount: number; maxOutput: number }
  | { ok: false; reason: 'insufficient_credits' | 'daily_cap'; message: string };

/** Pure policy, run inside the transaction with the funds it read there. */
export type ReservationPlanner = (funds: Funds) => ReservationDecision;

export interface ReserveRequest {
  reservationId: string;
  accountId: string;
  keyId: string;
  model: string;
  leaseMs: number;
  /** The request's Idempotency-Key claim, tied to this reservation in the same transaction. */
  idempotencyKey?: string;
}

/**
 * What a request has delivered so far, recorded with each lease renewal: if
 * its process can no longer settle (a crash, a database that refuses), the
 * sweeper settles this instead of releasing the hold, so that delivered
 * content is paid for.
 */
export interface Delivered {
  credits: number;
  promptTokens: number;
  completionTokens: number;
  routedModel: string;
}

/** One lease in a batch renewal: extended to now + `leaseMs`, recording `delivered` when given. */
export interface LeaseRenewal {
  reservationId: string;
  leaseMs: number;
  delivered?: Delivered | null;
}

/**
 * The reserving transaction's answer. `rate_limit`: the key's `rate_limit_rpm`
 * is used up (checked first; a request counts against it only once its
 * reservation is taken), with the seconds until one more request fits.
 */
export type ReserveOutcome =
  | { ok: true; amount: number; maxOutput: number }
  | { ok: false; reason: 'insufficient_credits' | 'daily_cap'; message: string }
  | { ok: false; reason: 'rate_limit'; message: string; retryAfterSeconds: number };

export interface SettleRequest {
  reservationId: string;
  /** Credits the request cost at list price. */
  credits: number;
  promptTokens: number;
  completionTokens: number;
  routedModel: string;
  /**
   * The response kept under the reservation's Idempotency-Key, built inside the
   * settling transaction from its result: "settled" and "replayable" commit together.
   */
  respond?: (result: SettleResult) => StoredResponse;
}

export interface SettleResult {
  charged: number;
  /** What the price asked for beyond what could be taken (recorded on the ledger). */
  shortfall: number;
  balanceRemaining: number;
}

export interface UsageQuery {
  accountId: string;
  from: Date;
  /** Exclusive. */
  until: Date;
  model?: string;
}

export interface UsageRow {
  date: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  credits: number;
}

export interface LedgerDisagreement {
  accountId: string;
  /** A grant (`balance`, `held`), a key (`held`) or a settled reservation (`charged`). */
  subject: string;
  field: 'balance' | 'held' | 'charged';
  stored: number;
  recomputed: number;
}

/** Told how far long work has come: `done` of `total` units, `done` reaching `total` at the end. */
export type ProgressListener = (done: number, total: number) => void;

export interface LedgerReport {
  accounts: number;
  grants: number;
  entries: number;
  disagreements: LedgerDisagreement[];
}

/**
 * `running`: the first request is alive (its reservation is held, or it is about
 * to reserve). `interrupted`: the first request was charged for what it delivered
 * but died before it could store a response; it is not run again.
 */
export type IdempotencyClaim =
  | { state: 'claimed' }
  | { state: 'running' }
  | { state: 'interrupted' }
  | { state: 'mismatch' }
  | { state: 'done'; response: StoredResponse };

export interface StoredResponse {
  status: number;
  body: unknown;
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  ping(): Promise<void>;
  close(): Promise<void>;

  createAccount(name: string | null): Promise<Account>;
  getAccount(id: string): Promise<Account | null>;
  /** Accounts in id order, `limit` of them after the id `after` (a cursor). */
  listAccounts(query: { limit: number; after?: string | null }): Promise<Account[]>;
  grant(accountId: string, kind: CreditKind, amount: number, expiresAt: Date | null): Promise<Grant>;
  balances(accountId: string): Promise<Balances>;

  createApiKey(key: NewApiKey): Promise<ApiKeyRecord>;
  findApiKey(id: string): Promise<StoredApiKey | null>;
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;
  /** False when the key is unknown, another account's, or already revoked. */
  revokeApiKey(accountId: string, keyId: string): Promise<boolean>;
  /** Records use; cheap when the key was touched within the last minute. */
  touchApiKey(keyId: string): Promise<void>;

  /** Expires lapsed earned credits, reads the funds, asks `plan`, and takes the hold, in one transaction. */
  reserve(request: ReserveRequest, plan: ReservationPlanner): Promise<ReserveOutcome>;
  /** Extends a live reservation's lease and records what it delivered so far; false when it is no longer held. */
  renewLease(reservationId: string, leaseMs: number, delivered?: Delivered | null): Promise<boolean>;
  /**
   * `renewLease` for many reservations in one statement (each id once); answers the
   * ids still held, hence renewed. Closed or unknown ones are left as they are.
   */
  renewLeases(renewals: readonly LeaseRenewal[]): Promise<Set<string>>;
  /** Charges and releases the rest; idempotent on a reservation already closed. */
  settle(request: SettleRequest): Promise<SettleResult>;
  /** Releases a reservation at no charge; its Idempotency-Key claim goes with it. */
  release(reservationId: string): Promise<void>;
  /**
   * Closes every reservation whose lease has passed, each once: settled for what
   * it recorded as delivered, else released. Returns how many.
   */
  releaseExpiredLeases(): Promise<number>;
  /** Deletes Idempotency-Key records past their 24 h; returns how many. */
  pruneIdempotencyKeys(): Promise<number>;

  usage(query: UsageQuery): Promise<UsageRow[]>;
  /** `onProgress(done, total)` is told as the checks advance (rows on SQLite, queries on PostgreSQL). */
  verifyLedger(onProgress?: ProgressListener): Promise<LedgerReport>;

  claimIdempotencyKey(accountId: string, key: string, fingerprint: string): Promise<IdempotencyClaim>;
  /** Lets go of a claim that never reserved (the request was refused before it reached the ledger). */
  abandonIdempotencyKey(accountId: string, key: string): Promise<void>;
}
