/**
 * SQLite schema, applied in order by version. Money is guarded here: balances
 * and holds can never go negative or past what a grant owns (CHECKs), and the
 * ledger refuses UPDATE and DELETE (triggers).
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT,
    created_at  INTEGER NOT NULL
  );

  CREATE TABLE grants (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    kind        TEXT NOT NULL CHECK (kind IN ('earned', 'purchased')),
    amount      INTEGER NOT NULL CHECK (amount > 0),
    balance     INTEGER NOT NULL CHECK (balance >= 0),
    held        INTEGER NOT NULL DEFAULT 0 CHECK (held >= 0 AND held <= balance),
    expires_at  INTEGER,
    created_at  INTEGER NOT NULL,
    CHECK ((kind = 'earned') = (expires_at IS NOT NULL))
  );
  CREATE INDEX grants_by_account ON grants(account_id, kind, expires_at);

  CREATE TABLE ledger (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id      TEXT NOT NULL REFERENCES accounts(id),
    grant_id        TEXT REFERENCES grants(id),
    entry           TEXT NOT NULL CHECK (entry IN ('grant', 'charge', 'expire', 'shortfall')),
    amount          INTEGER NOT NULL,
    reservation_id  TEXT,
    shortfall       INTEGER NOT NULL DEFAULT 0 CHECK (shortfall >= 0),
    created_at      INTEGER NOT NULL,
    CHECK ((entry = 'shortfall') = (grant_id IS NULL))
  );
  CREATE INDEX ledger_by_grant ON ledger(grant_id);
  CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
  CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

  CREATE TABLE api_keys (
    id                  TEXT PRIMARY KEY,
    account_id          TEXT NOT NULL REFERENCES accounts(id),
    name                TEXT,
    environment         TEXT NOT NULL CHECK (environment IN ('live', 'test')),
    daily_credit_limit  INTEGER CHECK (daily_credit_limit IS NULL OR daily_credit_limit >= 0),
    redacted_key        TEXT NOT NULL,
    salt                TEXT NOT NULL,
    hash                TEXT NOT NULL,
    created_at          INTEGER NOT NULL,
    last_used_at        INTEGER,
    revoked_at          INTEGER,
    -- Credits held by this key's reservations in flight, whatever day they were taken.
    held                INTEGER NOT NULL DEFAULT 0 CHECK (held >= 0)
  );
  CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at);

  -- Per key and UTC day: credits settled that day. The daily cap holds on this
  -- day's spent plus the key's holds in flight (api_keys.held).
  CREATE TABLE key_days (
    key_id  TEXT NOT NULL REFERENCES api_keys(id),
    day     TEXT NOT NULL,
    spent   INTEGER NOT NULL DEFAULT 0 CHECK (spent >= 0),
    PRIMARY KEY (key_id, day)
  );

  CREATE TABLE reservations (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    key_id       TEXT NOT NULL REFERENCES api_keys(id),
    model        TEXT NOT NULL,
    amount       INTEGER NOT NULL CHECK (amount >= 0),
    day          TEXT NOT NULL,
    -- released: let go at no charge; lapsed: released by a sweeper after its lease passed,
    -- and still settled (late, from free credits) if its request ends after all.
    state        TEXT NOT NULL CHECK (state IN ('held', 'settled', 'released', 'lapsed')),
    charged      INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
    lease_until  INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    closed_at    INTEGER
  );
  CREATE INDEX reservations_held ON reservations(lease_until) WHERE state = 'held';

  CREATE TABLE reservation_holds (
    reservation_id  TEXT NOT NULL REFERENCES reservations(id),
    grant_id        TEXT NOT NULL REFERENCES grants(id),
    amount          INTEGER NOT NULL CHECK (amount > 0),
    PRIMARY KEY (reservation_id, grant_id)
  );

  CREATE TABLE completions (
    reservation_id     TEXT PRIMARY KEY REFERENCES reservations(id),
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    key_id             TEXT NOT NULL REFERENCES api_keys(id),
    model              TEXT NOT NULL,
    routed_model       TEXT NOT NULL,
    prompt_tokens      INTEGER NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL CHECK (completion_tokens >= 0),
    credits            INTEGER NOT NULL CHECK (credits >= 0),
    settled_at         INTEGER NOT NULL
  );
  CREATE INDEX completions_by_account ON completions(account_id, settled_at);

  CREATE TABLE idempotency_keys (
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'done')),
    status       INTEGER,
    body         TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (account_id, key)
  );
  `,
  // 2: a claim's liveness follows its reservation; a reservation records what it delivered.
  `
  ALTER TABLE reservations ADD COLUMN idempotency_key TEXT;
  ALTER TABLE reservations ADD COLUMN delivered_credits INTEGER NOT NULL DEFAULT 0 CHECK (delivered_credits >= 0);
  ALTER TABLE reservations ADD COLUMN delivered_prompt_tokens INTEGER NOT NULL DEFAULT 0 CHECK (delivered_prompt_tokens >= 0);
  ALTER TABLE reservations ADD COLUMN delivered_completion_tokens INTEGER NOT NULL DEFAULT 0 CHECK (delivered_completion_tokens >= 0);
  ALTER TABLE reservations ADD COLUMN routed_model TEXT;
  ALTER TABLE idempotency_keys ADD COLUMN reservation_id TEXT;
  CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_at);
  `,
  // 3: a key's request rate limit, as GCRA's theoretical arrival time (epoch ms).
  `
  ALTER TABLE api_keys ADD COLUMN rate_limit_rpm INTEGER CHECK (rate_limit_rpm IS NULL OR rate_limit_rpm > 0);
  ALTER TABLE api_keys ADD COLUMN rate_tat INTEGER NOT NULL DEFAULT 0;
  `,
  // 4: an account's spent grants stay in the table (the ledger points at them) but out of
  // every metering read: those read the live ones (balance > 0) through their own index,
  // and the sweeper finds earned credits past their expiry without reading every grant.
  // grants_by_account served those reads and nothing else: it read the spent grants too.
  // The last three are PostgreSQL's since version 1: without them verifyLedger read every
  // hold, open reservation and ledger entry once per grant, key and settled reservation.
  `
  DROP INDEX grants_by_account;
  CREATE INDEX grants_live ON grants(account_id, id) WHERE balance > 0;
  CREATE INDEX grants_lapsing ON grants(expires_at) WHERE kind = 'earned' AND balance > held;
  CREATE INDEX reservation_holds_by_grant ON reservation_holds(grant_id);
  CREATE INDEX reservations_held_by_key ON reservations(key_id) WHERE state = 'held';
  CREATE INDEX ledger_by_reservation ON ledger(reservation_id);
  `,
];
