/**
 * The progress bar of `ledger verify` and `migrate`: drawn on a terminal only,
 * never into --json or a pipe; and the stores' progress hooks it draws from,
 * on each backend.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { runCli } from '../../src/cli/program.js';
import { progressBar, progressLine } from '../../src/cli/progress.js';
import { migrateDatabase } from '../../src/store/open.js';
import { MIGRATIONS } from '../../src/store/sqlite/schema.js';
import {
  emptyPostgresSchema, forEachBackend, makeAccount, openTempSqliteStore, openTempStore, reserveFor, settleRequest,
} from '../support/store-fixture.js';

class Terminal extends Writable {
  text = '';
  constructor(readonly isTTY: boolean, readonly columns = 100) {
    super();
  }
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.text += String(chunk);
    done();
  }
}

const tempDatabase = () => `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-progress-')), 'gateway.db')}`;

describe('progress bar', () => {
  it('draws one line, redrawn in place, and clears it when done', () => {
    const tty = new Terminal(true);
    let clock = 0;
    const bar = progressBar('verifying ledger', tty, { enabled: true, now: () => (clock += 1000) });
    bar.update(0, 4);
    bar.update(2, 4);
    bar.update(4, 4);
    bar.finish();
    assert.equal(tty.text, [
      `\rverifying ledger [${'-'.repeat(30)}]   0%  0/4\x1b[K`,
      `\rverifying ledger [${'#'.repeat(15)}${'-'.repeat(15)}]  50%  2/4\x1b[K`,
      `\rverifying ledger [${'#'.repeat(30)}] 100%  4/4\x1b[K`,
      '\r\x1b[K',
    ].join(''));
  });

  it('redraws at most every 80 ms, but always draws the end', () => {
    const tty = new Terminal(true);
    const bar = progressBar('x', tty, { enabled: true, now: () => 5 });
    for (let done = 0; done <= 1000; done += 100) bar.update(done, 1000);
    assert.equal(tty.text.split('\r').length - 1, 2, tty.text);
    assert.match(tty.text, /1000\/1000/);
  });

  it('draws nothing on a pipe, or when turned off (--json)', () => {
    for (const [tty, enabled] of [[false, true], [true, false]] as const) {
      const stream = new Terminal(tty);
      const bar = progressBar('x', stream, { enabled });
      bar.update(1, 2);
      bar.update(2, 2);
      bar.finish();
      assert.equal(stream.text, '');
    }
  });

  it('fits the terminal and shows 100% for nothing to do', () => {
    assert.equal(progressLine('migrating', 0, 0, 200), `migrating [${'#'.repeat(30)}] 100%  0/0`);
    assert.equal(progressLine('migrating', 1, 3, 20), 'migrating [########', 'cut to 19 columns');
  });
});

describe('svc-gateway ledger verify and migrate on a terminal', () => {
  const run = async (isTTY: boolean, ...args: string[]) => {
    const out = new Terminal(false);
    const err = new Terminal(isTTY);
    const code = await runCli(args, { env: {}, out, err });
    return { code, stdout: out.text, stderr: err.text };
  };

  it('shows the bar on stderr of a terminal, and never with --json or on a pipe', async () => {
    const database = tempDatabase();
    const migrated = await run(true, 'migrate', '--database', database);
    assert.equal(migrated.code, 0);
    assert.equal(migrated.stdout, `sqlite database at schema version ${MIGRATIONS.length}\n`);
    assert.match(migrated.stderr, new RegExp(`^\\rmigrating \\[[#-]{30}\\] +\\d+%  0/${MIGRATIONS.length}\\x1b\\[K`));
    assert.match(migrated.stderr, new RegExp(`100%  ${MIGRATIONS.length}/${MIGRATIONS.length}\\x1b\\[K\\r\\x1b\\[K$`));

    const verified = await run(true, 'ledger', 'verify', '--database', database);
    assert.equal(verified.code, 0);
    assert.equal(verified.stdout, 'ok: 0 accounts, 0 grants, 0 ledger entries\n');
    assert.match(verified.stderr, /^\rverifying ledger \[#{30}\] 100%  0\/0\x1b\[K\r\x1b\[K$/);

    for (const [tty, args] of [[true, ['--json']], [false, []]] as const) {
      for (const command of [['migrate'], ['ledger', 'verify']]) {
        const quiet = await run(tty, ...command, ...args, '--database', database);
        assert.equal(quiet.code, 0);
        assert.equal(quiet.stderr, '', `${command.join(' ')} ${args.join(' ')} tty=${tty}`);
      }
    }
  });
});

describe('verifyLedger on a large SQLite ledger', () => {
  it('tells its progress every 500 rows as it goes', async () => {
    const t = openTempSqliteStore();
    try {
      const account = await t.store.createAccount(null);
      // 1,200 spent grants (balance 0, no ledger entries: nothing to disagree), written in one statement.
      t.raw().prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)
        INSERT INTO grants (id, account_id, kind, amount, balance, held, expires_at, created_at)
        SELECT 'grant_bulk_' || i, ?, 'purchased', 1, 0, 0, NULL, 0 FROM n`).run(account.id);
      const calls: Array<[number, number]> = [];
      const report = await t.store.verifyLedger((done, total) => calls.push([done, total]));
      assert.equal(report.grants, 1200);
      assert.deepEqual(report.disagreements, []);
      assert.deepEqual(calls, [[500, 1200], [1000, 1200], [1200, 1200]]);
    } finally {
      await t.cleanup();
    }
  });
});

forEachBackend('progress hooks', (backend) => {
  it('verifyLedger tells its progress, ending at done = total', async () => {
    const t = await openTempStore(undefined, backend);
    try {
      const account = await makeAccount(t.store, { purchased: 1000, earned: [{ amount: 50, expiresAt: '2099-01-01T00:00:00Z' }] });
      const { id } = await reserveFor(t.store, account, 100);
      await t.store.settle(settleRequest(id, 60));
      const calls: Array<[number, number]> = [];
      const report = await t.store.verifyLedger((done, total) => calls.push([done, total]));
      assert.deepEqual(report.disagreements, []);
      assert.ok(calls.length > 0);
      const total = calls[0]![1];
      // SQLite counts rows (1 key + 2 grants + 1 settled reservation); PostgreSQL its five queries.
      assert.equal(total, backend === 'sqlite' ? 4 : 5);
      assert.deepEqual(calls[calls.length - 1], [total, total]);
      calls.reduce((previous, [done, each]) => {
        assert.equal(each, total);
        assert.ok(done >= previous && done <= total);
        return done;
      }, 0);
    } finally {
      await t.cleanup();
    }
  });

  it('migrating tells each migration applied, and only the end when none is missing', async () => {
    const schema = backend === 'postgres' ? await emptyPostgresSchema() : null;
    const url = schema?.url ?? tempDatabase();
    try {
      const calls: Array<[number, number]> = [];
      const { version } = await migrateDatabase(url, (done, total) => calls.push([done, total]));
      assert.equal(version, MIGRATIONS.length);
      assert.deepEqual(calls, Array.from({ length: version + 1 }, (_, i) => [i, version]));
      const again: Array<[number, number]> = [];
      await migrateDatabase(url, (done, total) => again.push([done, total]));
      assert.deepEqual(again, [[version, version]]);
    } finally {
      await schema?.drop();
    }
  });
});
