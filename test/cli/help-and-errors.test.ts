/**
 * The command line's help and its refusals, run in this process through
 * `runCli` (what the binary runs) for speed: help lists every command and
 * option, a bad command line is one line on stderr and exit code 2.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { before, describe, it } from 'node:test';
import { COMMANDS, runCli } from '../../src/cli/program.js';

const database = `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-cli-errors-')), 'cli.db')}`;

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.text += String(chunk);
    done();
  }
}

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new Capture();
  const err = new Capture();
  const code = await runCli(args, { env: {}, out, err });
  return { code, stdout: out.text, stderr: err.text };
}

describe('svc-gateway help', () => {
  it('lists every command with its options under --help', async () => {
    const help = await run('--help');
    assert.equal(help.code, 0);
    assert.equal(help.stderr, '');
    for (const spec of COMMANDS) {
      const flags = spec.options.map(([f]) => f.split(' ')[0]);
      assert.match(help.stdout, new RegExp(`svc-gateway ${spec.name}\\b.*${flags.join('.*')}`), spec.name);
    }
    assert.match(help.stdout, /Exit codes: 0 done; 1 not found/);
  });

  it('lists every option of each command under <command> --help', async () => {
    for (const spec of COMMANDS) {
      const help = await run(...spec.name.split(' '), '--help');
      assert.equal(help.code, 0, spec.name);
      assert.match(help.stdout, new RegExp(`^Usage: svc-gateway ${spec.name} \\[options\\]`), spec.name);
      for (const [flags, , required] of [...spec.options, ['--database <url>'], ['--json']] as const) {
        assert.match(help.stdout, new RegExp(`^  ${flags.replace(/[[\]]/g, '\\$&')} .*${required ? '\\(required\\)' : ''}`, 'm'), `${spec.name} ${flags}`);
      }
    }
  });

  it('answers no command, or a group without its action, with the help on stderr and exit code 2', async () => {
    const none = await run();
    assert.equal(none.code, 2);
    assert.match(none.stderr, /^Usage: svc-gateway/);
    const group = await run('keys');
    assert.equal(group.code, 2);
    assert.match(group.stderr, /^Usage: svc-gateway keys .*\n[\s\S]*revoke/);
  });
});

describe('svc-gateway refusals', () => {
  let accountId: string;
  before(async () => {
    const created = await run('accounts', 'create', '--json', '--database', database);
    accountId = (JSON.parse(created.stdout) as { account: { id: string } }).account.id;
  });

  it('refuses a bad command line with one line on stderr naming the option, and exit code 2', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['usage', '--account', accountId, '--start-date', '2026-02-30'], /^svc-gateway: --start-date: start_date is not a calendar date\.\n$/],
      [['usage', '--account', accountId, '--end-date', 'yesterday'], /^svc-gateway: --end-date: end_date must be a date as YYYY-MM-DD\.\n$/],
      [['usage', '--account', accountId, '--start-date', '2026-03-02', '--end-date', '2026-03-01'], /--start-date: start_date must not be after end_date/],
      [['usage', '--account', accountId, '--start-date', '2025-01-01', '--end-date', '2026-03-01'], /--start-date: The period may span at most 366 days/],
      [['usage'], /^svc-gateway: --account is required\n$/],
      [['accounts', 'list', '--limit', '0'], /--limit must be from 1 to 100, got 0/],
      [['accounts', 'list', '--limit', '101'], /--limit must be from 1 to 100, got 101/],
      [['accounts', 'list', '--limit', 'ten'], /--limit must be a non-negative integer, got 'ten'/],
      [['accounts', 'show'], /--account is required/],
      [['keys', 'revoke', '--account', accountId], /--key is required/],
      [['keys', 'list', '--database', database, '--account'], /^svc-gateway: option '--account <id>' argument missing \(see svc-gateway keys list --help\)\n$/],
      [['keys', 'list', '--account', '--json'], /^svc-gateway: option '--account <id>' argument '--json' is invalid\. It needs a value, not another option\./],
      [['credits', 'show', '--acount', accountId], /^svc-gateway: unknown option '--acount' \(Did you mean --account\?\) \(see svc-gateway credits show --help\)\n$/],
      [['credits', 'show', accountId], /too many arguments/],
      [['keys', 'rotate'], /^svc-gateway: unknown command 'rotate' .*\(see svc-gateway keys --help\)\n$/],
      [['ledger', 'verify', '--database', 'mysql://db'], /DATABASE_URL must start with sqlite: or postgres:\/\//],
    ];
    for (const [args, message] of cases) {
      const result = await run(...args, ...(args.includes('--database') ? [] : ['--database', database]));
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(' '));
      assert.equal(result.stderr.split('\n').length, 2, `one line: ${result.stderr}`);
      assert.equal(result.stdout, '');
    }
  });

  it('answers an unknown key, or another account\'s, with exit code 1', async () => {
    const other = JSON.parse((await run('accounts', 'create', '--json', '--database', database)).stdout) as { api_key: { id: string } };
    for (const key of ['key_nope', other.api_key.id]) {
      const result = await run('keys', 'revoke', '--account', accountId, '--key', key, '--database', database);
      assert.equal(result.code, 1);
      assert.equal(result.stderr, `svc-gateway: no active key ${key} on account ${accountId}\n`);
    }
    const listed = await run('keys', 'list', '--account', accountId, '--json', '--database', database);
    assert.equal((JSON.parse(listed.stdout) as { data: unknown[] }).data.length, 1, 'the account\'s own key is still there');
  });
});
