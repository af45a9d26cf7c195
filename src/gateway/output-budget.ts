/**
 * Output counted as it streams, so that an upstream that ignores `max_tokens`
 * cannot deliver more than the reservation covers. A running sum of each
 * piece's tokens is about an upper bound of the whole text's count (BPE merges
 * only within pieces), so it is cheap and errs early; only when that sum passes
 * the bound is the whole output counted exactly, and what does not fit is cut.
 */
import { countTextTokens } from '../metering/tokens.js';
import type { UpstreamEvent } from '../providers/types.js';

export interface Admitted {
  /** The event as far as it fits, or null when nothing of it does. */
  event: UpstreamEvent | null;
  /** Nothing more may follow: the answer ends here with `finish_reason: "length"`. */
  cut: boolean;
}

export class OutputBudget {
  private estimate: number;

  /**
   * `output()` is the whole output so far, as it is billed (text, tool names and
   * arguments); `spent` what of it came before this budget (an answer continued on another route).
   */
  constructor(private readonly max: number, private readonly output: () => string, spent = 0) {
    this.estimate = spent;
  }

  admit(event: UpstreamEvent): Admitted {
    switch (event.type) {
      case 'delta': {
        const fitted = this.fit(event.content);
        if (fitted === event.content) return { event, cut: false };
        return { event: fitted === '' ? null : { ...event, content: fitted }, cut: true };
      }
      case 'tool_call': {
        // A call's pieces are not cut in the middle: one that does not fit whole ends the answer.
        const text = (event.name ?? '') + event.arguments;
        return this.fit(text) === text ? { event, cut: false } : { event: null, cut: true };
      }
      default:
        return { event, cut: false };
    }
  }

  /** `piece` if it fits in what is left, else its longest prefix that does (maybe ''). */
  private fit(piece: string): string {
    if (piece === '') return piece;
    const tokens = countTextTokens(piece, this.max + 1);
    if (this.estimate + tokens <= this.max) {
      this.estimate += tokens;
      return piece;
    }
    const before = this.output();
    const exact = countTextTokens(before + piece, this.max + 1);
    if (exact <= this.max) {
      this.estimate = exact;
      return piece;
    }
    const room = this.max - countTextTokens(before, this.max + 1);
    this.estimate = this.max;
    return room <= 0 ? '' : longestPrefixWithin(piece, room);
  }
}

/** The longest prefix of `text` of at most `limit` tokens, by bisection on its length. */
function longestPrefixWithin(text: string, limit: number): string {
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (countTextTokens(text.slice(0, mid), limit + 1) <= limit) low = mid;
    else high = mid - 1;
  }
  // Never half a surrogate pair.
  const code = text.charCodeAt(low - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? low - 1 : low);
}
