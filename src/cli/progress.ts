/**
 * A progress bar on stderr for work that takes a while (`ledger verify`,
 * `migrate`). Drawn only on a terminal: never when stderr is piped or logged,
 * and never with `--json`, so that what a script reads is unchanged.
 */
import type { ProgressListener } from '../store/types.js';

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

export interface Progress {
  update: ProgressListener;
  /** Clears the bar, leaving the line for what comes next. */
  finish(): void;
}

const BAR_WIDTH = 30;
const MIN_REDRAW_MS = 80;

export const silentProgress: Progress = { update: () => {}, finish: () => {} };

export function progressBar(label: string, stream: ProgressStream, options: { enabled: boolean; now?: () => number }): Progress {
  if (!options.enabled || !stream.isTTY) return silentProgress;
  const now = options.now ?? Date.now;
  let drawn = false;
  let lastAt = -Infinity;
  let lastLine = '';
  return {
    update(done, total) {
      const finished = total > 0 && done >= total;
      if (!finished && now() - lastAt < MIN_REDRAW_MS) return;
      const line = progressLine(label, done, total, stream.columns ?? 80);
      if (line === lastLine) return;
      stream.write(`\r${line}\x1b[K`);
      drawn = true;
      lastAt = now();
      lastLine = line;
    },
    finish() {
      if (drawn) stream.write('\r\x1b[K');
      drawn = false;
    },
  };
}

/** `label [##########----------]  50%  500/1000`, cut to the terminal's width. */
export function progressLine(label: string, done: number, total: number, columns: number): string {
  const ratio = total > 0 ? Math.min(1, Math.max(0, done / total)) : 1;
  const filled = Math.round(ratio * BAR_WIDTH);
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}]`;
  const percent = `${Math.floor(ratio * 100)}%`.padStart(4);
  return `${label} ${bar} ${percent}  ${done}/${total}`.slice(0, Math.max(0, columns - 1));
}
