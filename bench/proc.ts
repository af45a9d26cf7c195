/**
 * What the kernel says a process tree used: CPU time from /proc/PID/stat
 * (utime + stime, in clock ticks) and resident memory from /proc/PID/status.
 * A gateway started with --workers is a primary and its workers: the tree.
 */
import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

export function processTree(pid: number): number[] {
  const children = (read(`/proc/${pid}/task/${pid}/children`) ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
  return [pid, ...children.flatMap(processTree)];
}

/** CPU seconds (user + system) the tree has used so far; a process that exited counts no more. */
export function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const stat = read(`/proc/${pid}/stat`);
    if (!stat) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / TICKS_PER_SECOND;
}

/** Resident memory of the tree now, in MB. */
export function rssMb(pids: number[]): number {
  let kb = 0;
  for (const pid of pids) {
    const match = /VmRSS:\s+(\d+) kB/.exec(read(`/proc/${pid}/status`) ?? '');
    if (match) kb += Number(match[1]);
  }
  return kb / 1024;
}

/** Samples the tree's RSS every `everyMs` until stopped; answers the peak. */
export function rssPeak(pidsOf: () => number[], everyMs = 100): { stop(): number } {
  let peak = rssMb(pidsOf());
  const timer = setInterval(() => {
    peak = Math.max(peak, rssMb(pidsOf()));
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssMb(pidsOf()));
    },
  };
}
