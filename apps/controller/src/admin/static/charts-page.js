// Charts of tasks, tokens and cost over time.
import { $, SVG_NS, api, coalesced, el, fmtCost, fmtDuration, svgAdd } from './core.js';

const PALETTE = [
  '#0969da',
  '#bf8700',
  '#8250df',
  '#cf222e',
  '#1b7c83',
  '#e16f24',
  '#57606a',
  '#bc4c00',
  '#116329',
];
/** completed is always green, failures get the palette in a stable (alphabetical) order */
const seriesColors = (names) => {
  const colors = new Map();
  let i = 0;
  for (const n of names) colors.set(n, n === 'completed' ? '#2da44e' : PALETTE[i++ % PALETTE.length]);
  return colors;
};
/** a round axis maximum at or above v: 1, 2, 2.5 or 5 times a power of ten */
const niceMax = (v) => {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
};

/**
 * Bars over categories (hours, days): `stacked` puts a category's series on top of each other, else side by
 * side. Every bar carries its category, series and value as data attributes and a tooltip.
 */
function barChart({ name, categories, labels, series, stacked, format }) {
  const W = 900,
    H = 220,
    left = 64,
    right = 10,
    top = 10,
    bottom = 40;
  const plotW = W - left - right,
    plotH = H - top - bottom;
  const max = niceMax(
    Math.max(
      0,
      ...categories.map((_, i) =>
        stacked
          ? series.reduce((sum, s) => sum + s.values[i], 0)
          : Math.max(0, ...series.map((s) => s.values[i])),
      ),
    ),
  );
  const legendRows = Math.ceil(series.length / 4);
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H + legendRows * 18}`);
  svg.setAttribute('width', '100%');
  svg.setAttribute('data-chart', name);
  svg.setAttribute('role', 'img');
  const y = (v) => top + plotH - (v / max) * plotH;
  for (let g = 0; g <= 4; g++) {
    const v = (max * g) / 4;
    svgAdd(svg, 'line', { class: 'grid-line', x1: left, x2: W - right, y1: y(v), y2: y(v) });
    svgAdd(svg, 'text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, format(v));
  }
  svgAdd(svg, 'line', { class: 'axis', x1: left, x2: W - right, y1: y(0), y2: y(0) });
  const slot = plotW / categories.length;
  const barW = stacked ? Math.max(slot * 0.8, 0.5) : Math.max((slot * 0.8) / series.length, 0.5);
  const labelEvery = Math.max(1, Math.ceil(categories.length / 10));
  categories.forEach((category, i) => {
    const x0 = left + i * slot + slot * 0.1;
    let base = 0;
    series.forEach((s, k) => {
      const v = s.values[i];
      if (!v) return;
      const x = stacked ? x0 : x0 + k * barW;
      const from = stacked ? base : 0;
      base += v;
      const bar = svgAdd(svg, 'rect', {
        class: 'bar',
        x,
        y: y(from + v),
        width: barW,
        height: Math.max(y(from) - y(from + v), 0.5),
        fill: s.color,
        'data-category': category,
        'data-series': s.name,
        'data-value': v,
      });
      svgAdd(bar, 'title', {}, `${labels[i]} · ${s.name}: ${format(v)}`);
    });
    if (i % labelEvery === 0)
      svgAdd(svg, 'text', { x: x0, y: H - bottom + 14, 'text-anchor': 'start' }, labels[i]);
  });
  series.forEach((s, k) => {
    const lx = left + (k % 4) * 200,
      ly = H + Math.floor(k / 4) * 18;
    svgAdd(svg, 'rect', { x: lx, y: ly - 10, width: 10, height: 10, fill: s.color });
    svgAdd(svg, 'text', { x: lx + 14, y: ly }, s.name);
  });
  return svg;
}

/** Every hour (or day) from the window's start to its end, so quiet periods show as gaps. */
function timeBuckets(since, until, stepMs) {
  const out = [];
  const start = Math.floor(Date.parse(since) / stepMs) * stepMs;
  for (let t = start; t <= Date.parse(until); t += stepMs) out.push(new Date(t).toISOString());
  return out;
}

const fmtCount = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
const fmtTokens = (v) =>
  v >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : v >= 1e3 ? `${(v / 1e3).toFixed(1)}k` : fmtCount(v);

const charts = {
  async load() {
    const stats = await api(`/admin/stats?days=${$('charts-days').value}`);
    const hours = timeBuckets(stats.since, stats.until, 3_600_000);
    const reasons = [...new Set(stats.tasks_per_hour.map((r) => r.stop_reason ?? 'none'))].sort();
    const reasonColor = seriesColors(reasons);
    const perHour = new Map(
      stats.tasks_per_hour.map((r) => [`${r.hour}|${r.stop_reason ?? 'none'}`, r.tasks]),
    );
    const hourLabel = (h) => `${h.slice(5, 10)} ${h.slice(11, 13)}h`;
    this.show(
      'chart-tasks',
      reasons.length &&
        barChart({
          name: 'tasks-per-hour',
          categories: hours,
          labels: hours.map(hourLabel),
          stacked: true,
          format: fmtCount,
          series: reasons.map((r) => ({
            name: r,
            color: reasonColor.get(r),
            values: hours.map((h) => perHour.get(`${h}|${r}`) ?? 0),
          })),
        }),
    );
    const days = timeBuckets(stats.since, stats.until, 86_400_000).map((d) => d.slice(0, 10));
    const models = [...new Set(stats.usage_per_day.map((u) => u.model))].sort();
    const modelColor = seriesColors(models);
    const usage = new Map(stats.usage_per_day.map((u) => [`${u.day}|${u.model}`, u]));
    const perModel = (field, name, format) =>
      models.length &&
      barChart({
        name,
        categories: days,
        labels: days.map((d) => d.slice(5)),
        stacked: false,
        format,
        series: models.map((m) => ({
          name: m,
          color: modelColor.get(m),
          values: days.map((d) => usage.get(`${d}|${m}`)?.[field] ?? 0),
        })),
      });
    this.show('chart-tokens', perModel('total_tokens', 'tokens-per-day', fmtTokens));
    this.show(
      'chart-cost',
      perModel('cost_usd', 'cost-per-day', (v) => `$${Number(v.toPrecision(3))}`),
    );
    const durations = new Map(stats.duration_per_day.map((d) => [d.day, d]));
    this.show(
      'chart-duration',
      stats.duration.tasks > 0 &&
        barChart({
          name: 'duration-per-day',
          categories: days,
          labels: days.map((d) => d.slice(5)),
          stacked: false,
          format: (v) => fmtDuration(Math.round(v)),
          series: [
            { name: 'p50', color: '#0969da', values: days.map((d) => durations.get(d)?.p50_ms ?? 0) },
            { name: 'p95', color: '#bf8700', values: days.map((d) => durations.get(d)?.p95_ms ?? 0) },
          ],
        }),
    );
    const tokens = stats.usage_per_day.reduce((n, u) => n + u.total_tokens, 0);
    const cost = stats.usage_per_day.reduce((n, u) => n + u.cost_usd, 0);
    const d = stats.duration;
    $('charts-summary').textContent =
      `${d.tasks} tasks ended` +
      (d.tasks ? ` · duration p50 ${fmtDuration(d.p50_ms)}, p95 ${fmtDuration(d.p95_ms)}` : '') +
      ` · ${fmtTokens(tokens)} tokens · ${fmtCost(cost)}`;
  },
  show(id, svg) {
    $(id).replaceChildren(svg || el('p', { class: 'muted' }, 'no data in this window'));
  },
  refreshSoon: coalesced(1000, () => charts.load()),
};

// ---------------------------------------------------------------- routing and boot

export { charts };
