/**
 * The CI check that every dependency install script in package-lock.json is
 * reviewed in package.json's allowScripts: it passes on the project as it is,
 * and names the package when a lockfile brings one nobody reviewed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CHECK = join(ROOT, 'scripts', 'check-install-scripts.mjs');

interface Run { code: number; stdout: string; stderr: string }

function check(dir: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CHECK, dir], (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
    });
  });
}

interface Lockfile { packages: Record<string, Record<string, unknown>> }

describe('install scripts check', () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  /** A project directory with the real package.json (allowScripts changed by `allow`) and the real lockfile plus `extra` packages. */
  function project(extra: Lockfile['packages'], allow?: Record<string, boolean>): string {
    const dir = mkdtempSync(join(tmpdir(), 'svc-install-scripts-'));
    dirs.push(dir);
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>;
    if (allow) manifest.allowScripts = allow;
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Lockfile;
    Object.assign(lock.packages, extra);
    writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest));
    writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock));
    return dir;
  }

  it('passes on the project: every install script in the lockfile is in allowScripts', async () => {
    const run = await check(ROOT);
    assert.equal(run.code, 0, run.stderr);
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Lockfile;
    const withScripts = Object.entries(lock.packages).filter(([, entry]) => entry.hasInstallScript === true).map(([path]) => path);
    assert.ok(withScripts.length > 0, 'the lockfile does hold install scripts (better-sqlite3, esbuild)');
  });

  it('fails naming an unreviewed package with an install script, nested or scoped', async () => {
    const run = await check(project({
      'node_modules/fastify/node_modules/evil-postinstall': { version: '1.0.0', hasInstallScript: true },
      'node_modules/@acme/native': { version: '2.3.4', hasInstallScript: true },
      'node_modules/no-scripts-here': { version: '1.0.0' },
    }));
    assert.equal(run.code, 1);
    assert.match(run.stderr, /evil-postinstall@1\.0\.0 \(node_modules\/fastify\/node_modules\/evil-postinstall\)/);
    assert.match(run.stderr, /@acme\/native@2\.3\.4/);
    assert.doesNotMatch(run.stderr, /better-sqlite3|esbuild|no-scripts-here/);
    assert.match(run.stderr, /npm approve-scripts/);
  });

  it('counts a pinned entry only for its own version, and a denial as reviewed', async () => {
    const extra = { 'node_modules/native-thing': { version: '1.2.0', hasInstallScript: true } };
    const reviewed = { 'better-sqlite3': true, esbuild: false };
    assert.equal((await check(project(extra, { ...reviewed, 'native-thing@1.2.0': true }))).code, 0);
    assert.equal((await check(project(extra, { ...reviewed, 'native-thing@1.1.0 || 1.2.0': true }))).code, 0);
    const stale = await check(project(extra, { ...reviewed, 'native-thing@1.1.0': true }));
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /native-thing@1\.2\.0/);
  });

  it('fails when allowScripts is missing altogether', async () => {
    const run = await check(project({}, {}));
    assert.equal(run.code, 1);
    assert.match(run.stderr, /better-sqlite3@/);
    assert.match(run.stderr, /esbuild@/);
  });
});
