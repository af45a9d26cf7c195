#!/usr/bin/env node
/**
 * Fails when package-lock.json holds a package with an install script
 * (`hasInstallScript`) that package.json's `allowScripts` does not cover, so CI
 * stops on an unreviewed script instead of a user's install failing once npm
 * blocks them. Needs nothing installed: CI runs it before `npm ci`.
 *
 *   node scripts/check-install-scripts.mjs [project-dir]
 *
 * An `allowScripts` entry covers a package when its key is the package's name
 * (any version) or `name@version` with that exact version (`||` lists of exact
 * versions too). `false` entries count as reviewed: npm skips those scripts.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The packages in `lock` that have install scripts: `{ name, version, path }`. */
export function packagesWithInstallScripts(lock) {
  const found = [];
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === '' || entry.hasInstallScript !== true) continue;
    const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    found.push({ name, version: entry.version ?? '', path });
  }
  return found;
}

/** Whether an `allowScripts` record has an entry, allowing or denying, for this name and version. */
export function isReviewed(allowScripts, { name, version }) {
  for (const key of Object.keys(allowScripts)) {
    if (key === name) return true;
    const at = key.lastIndexOf('@');
    if (at <= 0 || key.slice(0, at) !== name) continue;
    if (key.slice(at + 1).split('||').some((v) => v.trim() === version)) return true;
  }
  return false;
}

/** The install-script packages of the project in `dir` that nobody reviewed. */
export function unreviewedInstallScripts(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8'));
  const allowScripts = manifest.allowScripts ?? {};
  return packagesWithInstallScripts(lock).filter((pkg) => !isReviewed(allowScripts, pkg));
}

function main() {
  const dir = resolve(process.argv[2] ?? join(fileURLToPath(new URL('.', import.meta.url)), '..'));
  const pending = unreviewedInstallScripts(dir);
  if (pending.length === 0) {
    console.log('install scripts: every package with one is reviewed in package.json allowScripts');
    return;
  }
  console.error(`install scripts: ${pending.length} package(s) in package-lock.json have install scripts not covered by package.json allowScripts:`);
  for (const pkg of pending) console.error(`  ${pkg.name}@${pkg.version} (${pkg.path})`);
  console.error('Review each script, then record it with `npm approve-scripts <name>` (allow) or `npm deny-scripts <name>` (deny).');
  process.exitCode = 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
