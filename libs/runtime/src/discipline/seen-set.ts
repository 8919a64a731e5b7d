/**
 * A set that only grows, for the state of a pure fold step: `with` returns a
 * new set and leaves the old one as it was, in O(1) when the old one is the
 * newest (the usual case in a fold) by sharing one insertion-ordered map; a
 * state that sees the first `size` entries of it sees exactly what it held.
 * Adding to an older set (a fold that branched) copies its entries once.
 */
export class SeenSet<T> {
  private constructor(
    private readonly order: Map<T, number>,
    readonly size: number,
  ) {}

  static empty<T>(): SeenSet<T> {
    return new SeenSet(new Map(), 0);
  }

  static of<T>(values: Iterable<T>): SeenSet<T> {
    let set = SeenSet.empty<T>();
    for (const v of values) set = set.with(v);
    return set;
  }

  has(value: T): boolean {
    const at = this.order.get(value);
    return at !== undefined && at < this.size;
  }

  with(value: T): SeenSet<T> {
    if (this.has(value)) return this;
    if (this.order.size === this.size) {
      this.order.set(value, this.size);
      return new SeenSet(this.order, this.size + 1);
    }
    const own = new Map([...this.order].filter(([, at]) => at < this.size));
    own.set(value, this.size);
    return new SeenSet(own, this.size + 1);
  }

  values(): T[] {
    return [...this.order].filter(([, at]) => at < this.size).map(([v]) => v);
  }
}
