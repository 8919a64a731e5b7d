import { SeenSet } from './seen-set';

describe('SeenSet', () => {
  it('holds what was added, in order, once', () => {
    const sut = SeenSet.empty<string>().with('a').with('b').with('a');
    expect(sut.size).toBe(2);
    expect(sut.has('a')).toBe(true);
    expect(sut.has('c')).toBe(false);
    expect(sut.values()).toEqual(['a', 'b']);
  });

  it('of: the values in order, each once', () => {
    expect(SeenSet.of([3, 1, 3, 2]).values()).toEqual([3, 1, 2]);
  });

  it('an older set stays as it was when a newer one grows', () => {
    const one = SeenSet.empty<number>().with(1);
    const two = one.with(2);
    expect(one.has(2)).toBe(false);
    expect(one.values()).toEqual([1]);
    expect(two.values()).toEqual([1, 2]);
  });

  it('two sets grown from the same older one do not see each other', () => {
    const base = SeenSet.empty<string>().with('x');
    const left = base.with('l');
    const right = base.with('r');
    expect(left.values()).toEqual(['x', 'l']);
    expect(right.values()).toEqual(['x', 'r']);
    expect(left.has('r')).toBe(false);
    expect(right.has('l')).toBe(false);
    expect(right.with('l').values()).toEqual(['x', 'r', 'l']);
  });
});
