/**
 * Bounds on the JSON a caller sends: how deeply it nests and how many values it
 * holds. JSON.parse in V8 accepts any depth, but JSON.stringify, zod and any
 * recursive walk overflow the stack on a few thousand levels, so the depth is
 * bounded before anything recurses. Both checks here use an explicit cursor or
 * stack, never recursion, so that no input can overflow the check itself.
 */

/** How deeply any part of a request body may nest (the body object is level 1). */
export const MAX_BODY_DEPTH = 128;

/** Bounds on one free-form value inside a body (tool parameters, a JSON schema). */
export interface JsonBounds {
  /** Levels of objects and arrays: `{}` is 1, `{"a": []}` is 2. */
  maxDepth: number;
  /** Values in all, containers and scalars alike. */
  maxValues: number;
}

export type BoundExceeded = 'depth' | 'values';

/**
 * Scans JSON text for nesting deeper than `maxDepth`, before it is parsed: a body
 * millions of levels deep costs seconds to parse, and this stops at the first
 * level too many. Returns null when the text keeps within the bound; else the
 * top-level key under which it went too deep, when the text is an object and
 * that key could be read (null for it otherwise).
 */
export function findDeepNesting(text: string, maxDepth: number): { key: string | null } | null {
  let depth = 0;
  let topIsObject = false;
  let expectKey = false;
  let key: string | null = null;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = endOfString(text, i);
      if (depth === 1 && topIsObject && expectKey) {
        key = readKey(text.slice(i, end + 1));
        expectKey = false;
      }
      i = end;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth += 1;
      if (depth > maxDepth) return { key: topIsObject ? key : null };
      if (depth === 1) {
        topIsObject = c === OPEN_BRACE;
        expectKey = topIsObject;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth -= 1;
    } else if (c === COMMA && depth === 1) {
      expectKey = topIsObject;
    }
  }
  return null;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The index of the quote that closes the string opening at `start` (the text's end if none does). */
function endOfString(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i += 1;
    else if (c === QUOTE) return i;
  }
  return text.length;
}

function readKey(quoted: string): string | null {
  try {
    const key: unknown = JSON.parse(quoted);
    return typeof key === 'string' ? key : null;
  } catch {
    return null;
  }
}

/** Which bound a parsed value passes first, or null when it keeps within both. */
export function exceededBound(value: unknown, bounds: JsonBounds): BoundExceeded | null {
  if (!isContainer(value)) return null;
  let values = 1;
  // Containers still to open, each with its level; depth first, so a deep chain is met early.
  const stack: Array<[object, number]> = [[value, 1]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [node, depth] = top;
    if (depth > bounds.maxDepth) return 'depth';
    const children = childrenOf(node, bounds.maxValues - values);
    if (children === null) return 'values';
    values += children.length;
    for (const child of children) {
      if (isContainer(child)) stack.push([child, depth + 1]);
    }
  }
  return null;
}

/** The values directly inside `node`, or null when there are more than `room` of them. */
function childrenOf(node: object, room: number): unknown[] | null {
  if (Array.isArray(node)) return node.length > room ? null : node;
  // Counted by its keys before any value is read: Object.values on a huge object is slow.
  const keys = Object.keys(node);
  if (keys.length > room) return null;
  const record = node as Record<string, unknown>;
  return keys.map((key) => record[key]);
}

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}
