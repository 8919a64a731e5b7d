/**
 * The best `k` items of a scan, kept in order while it runs: the higher score
 * first, the lower label among equals (a total order, labels being unique).
 * Ask `admits` first, so an item is built only when it gets in.
 */
export class TopK<T> {
  readonly items: T[] = [];

  constructor(
    private readonly k: number,
    private readonly scoreOf: (item: T) => number,
    private readonly labelOf: (item: T) => number,
  ) {}

  admits(score: number, label: number): boolean {
    if (this.k <= 0) return false;
    return this.items.length < this.k || this.ahead(score, label, this.items[this.k - 1]);
  }

  /** Puts in an item `admits` let in, dropping the worst when k are held. */
  add(score: number, label: number, item: T): void {
    const items = this.items;
    let at = Math.min(items.length, this.k - 1);
    for (; at > 0 && this.ahead(score, label, items[at - 1]); at--) items[at] = items[at - 1];
    items[at] = item;
  }

  private ahead(score: number, label: number, of: T): boolean {
    const s = this.scoreOf(of);
    return score > s || (score === s && label < this.labelOf(of));
  }
}
