/**
 * Continuing an answer on Anthropic. Anthropic continues a final assistant turn
 * natively, but refuses one that ends in whitespace: the prompt is sent with
 * that whitespace cut (see `convertMessages`), and the model then usually
 * starts its continuation with it. This drops up to as many whitespace
 * characters from the start of the continuation as were cut, so that the text
 * already delivered plus the continuation reads as one answer, never with the
 * whitespace doubled. Text other than whitespace is never dropped.
 */
export class LeadingWhitespace {
  constructor(private left: number) {}

  /** The next piece of the continuation, without the whitespace still to drop. */
  take(text: string): string {
    if (this.left === 0) return text;
    let start = 0;
    while (start < text.length && this.left > 0 && /\s/u.test(text[start]!)) {
      start++;
      this.left--;
    }
    // The first character that is not whitespace ends the dropping, however much is left.
    if (start < text.length) this.left = 0;
    return text.slice(start);
  }
}
