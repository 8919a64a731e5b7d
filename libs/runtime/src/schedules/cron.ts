import { ValidationError } from '@runledger/contracts';

/**
 * Cron expressions, pure: `minute hour day-of-month month day-of-week`, or six fields with seconds
 * first. Each field: `*` (or `?` for the days), a number, a range `a-b`, a list `a,b`, a step `*\/n`
 * or `a-b/n`; months and days of the week also by name (`jan`, `mon`); Sunday is 0 or 7. When both
 * day fields are restricted a day matching either runs (as in Vixie cron). Slots are found in the
 * schedule's IANA time zone, on its wall clock: a time a DST change skips does not run that day, and
 * a time it repeats runs once (the first).
 */
export interface Cron {
  seconds: ReadonlySet<number>;
  minutes: ReadonlySet<number>;
  hours: ReadonlySet<number>;
  days: ReadonlySet<number>;
  months: ReadonlySet<number>;
  weekdays: ReadonlySet<number>;
  /** day-of-month and day-of-week: which were restricted (not `*` / `?`) */
  daysRestricted: boolean;
  weekdaysRestricted: boolean;
  /** six fields: slots to the second */
  withSeconds: boolean;
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: string[];
  /** the first name's number (months: 1) */
  nameBase?: number;
}

const FIELDS: Record<string, FieldSpec> = {
  second: { name: 'second', min: 0, max: 59 },
  minute: { name: 'minute', min: 0, max: 59 },
  hour: { name: 'hour', min: 0, max: 23 },
  day: { name: 'day of month', min: 1, max: 31 },
  month: { name: 'month', min: 1, max: 12, names: MONTHS, nameBase: 1 },
  weekday: { name: 'day of week', min: 0, max: 7, names: WEEKDAYS, nameBase: 0 },
};

function bad(expression: string, why: string): never {
  throw new ValidationError(`invalid cron expression ${JSON.stringify(expression)}: ${why}`, {
    field: 'cron',
  });
}

function valueOf(text: string, f: FieldSpec, expression: string): number {
  const named = f.names?.indexOf(text.toLowerCase()) ?? -1;
  if (named !== -1) return named + (f.nameBase ?? 0);
  if (!/^\d{1,2}$/.test(text)) bad(expression, `${f.name}: ${JSON.stringify(text)} is not a number`);
  const n = Number(text);
  if (n < f.min || n > f.max) bad(expression, `${f.name}: ${n} is outside ${f.min}-${f.max}`);
  return n;
}

function parseField(text: string, f: FieldSpec, expression: string): { values: Set<number>; any: boolean } {
  const values = new Set<number>();
  let any = false;
  for (const part of text.split(',')) {
    const m = /^([^/]+)(?:\/(\d{1,2}))?$/.exec(part);
    if (!m) bad(expression, `${f.name}: ${JSON.stringify(part)} is not a value, range or step`);
    const step = m[2] === undefined ? 1 : Number(m[2]);
    if (step < 1) bad(expression, `${f.name}: a step must be at least 1`);
    let from: number;
    let to: number;
    if (m[1] === '*' || m[1] === '?') {
      if (m[1] === '?' && f !== FIELDS.day && f !== FIELDS.weekday)
        bad(expression, `${f.name}: ? only stands for a day field`);
      any ||= m[2] === undefined;
      [from, to] = [f.min, f === FIELDS.weekday ? 6 : f.max];
    } else if (m[1].includes('-')) {
      const [a, b, ...rest] = m[1].split('-');
      if (rest.length) bad(expression, `${f.name}: ${JSON.stringify(part)} is not a range`);
      [from, to] = [valueOf(a, f, expression), valueOf(b, f, expression)];
      if (from > to) bad(expression, `${f.name}: range ${part} runs backwards`);
    } else {
      from = valueOf(m[1], f, expression);
      to = m[2] === undefined ? from : f === FIELDS.weekday ? 6 : f.max;
    }
    for (let v = from; v <= to; v += step) values.add(f === FIELDS.weekday && v === 7 ? 0 : v);
  }
  return { values, any };
}

export function parseCron(expression: string): Cron {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6)
    bad(
      expression,
      `${fields.length} fields; expected 5 (minute hour day month weekday) or 6 (seconds first)`,
    );
  const withSeconds = fields.length === 6;
  const [sec, min, hour, day, month, weekday] = withSeconds ? fields : ['0', ...fields];
  const d = parseField(day, FIELDS.day, expression);
  const w = parseField(weekday, FIELDS.weekday, expression);
  return {
    seconds: parseField(sec, FIELDS.second, expression).values,
    minutes: parseField(min, FIELDS.minute, expression).values,
    hours: parseField(hour, FIELDS.hour, expression).values,
    days: d.values,
    months: parseField(month, FIELDS.month, expression).values,
    weekdays: w.values,
    daysRestricted: !d.any,
    weekdaysRestricted: !w.any,
    withSeconds,
  };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The IANA time zone's formatter; a name it does not know is refused. */
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      throw new ValidationError(
        `unknown time zone ${JSON.stringify(timeZone)} (an IANA name, e.g. Europe/Berlin)`,
        {
          field: 'time_zone',
        },
      );
    }
    formatters.set(timeZone, f);
  }
  return f;
}

/** Checks a time zone name (ValidationError when unknown). */
export function checkTimeZone(timeZone: string): void {
  formatter(timeZone);
}

/** The wall-clock time at instant `utcMs` in the zone, as milliseconds of a UTC date with those fields. */
export function wallOf(utcMs: number, timeZone: string): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(utcMs)))
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
}

/** The first instant whose wall clock in the zone reads `wall` (null: a DST change skips it). */
function instantOf(wall: number, timeZone: string): number | null {
  const candidates = new Set<number>();
  for (const probe of [wall - 36 * 3600_000, wall, wall + 36 * 3600_000]) {
    const offset = wallOf(probe, timeZone) - probe;
    candidates.add(wall - offset);
  }
  const exact = [...candidates].filter((t) => wallOf(t, timeZone) === wall).sort((a, b) => a - b);
  return exact[0] ?? null;
}

const DAY_MS = 86_400_000;

/** How many years ahead a slot is looked for before the expression counts as never due (e.g. Feb 30). */
const SEARCH_YEARS = 8;

/**
 * The first slot strictly after `afterMs` (an instant, ms), or null when the expression names no
 * time that exists (Feb 30) within SEARCH_YEARS.
 */
export function nextSlot(cron: Cron, timeZone: string, afterMs: number): number | null {
  const unit = cron.withSeconds ? 1000 : 60_000;
  // from the wall time of the next whole unit after `afterMs`
  let w = Math.floor(wallOf(afterMs, timeZone) / unit) * unit + unit;
  const limit = w + SEARCH_YEARS * 366 * DAY_MS;
  while (w < limit) {
    const d = new Date(w);
    if (!cron.months.has(d.getUTCMonth() + 1)) {
      w = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
      continue;
    }
    const dayOk = cron.days.has(d.getUTCDate());
    const weekdayOk = cron.weekdays.has(d.getUTCDay());
    const matchesDay =
      cron.daysRestricted && cron.weekdaysRestricted
        ? dayOk || weekdayOk
        : (!cron.daysRestricted || dayOk) && (!cron.weekdaysRestricted || weekdayOk);
    if (!matchesDay) {
      w = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
      continue;
    }
    if (!cron.hours.has(d.getUTCHours())) {
      w = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours() + 1);
      continue;
    }
    if (!cron.minutes.has(d.getUTCMinutes())) {
      w = Date.UTC(
        d.getUTCFullYear(),
        d.getUTCMonth(),
        d.getUTCDate(),
        d.getUTCHours(),
        d.getUTCMinutes() + 1,
      );
      continue;
    }
    if (!cron.seconds.has(d.getUTCSeconds())) {
      w += 1000;
      continue;
    }
    const at = instantOf(w, timeZone);
    if (at !== null && at > afterMs) return at;
    w += unit;
  }
  return null;
}

/**
 * The slots due in (afterMs, nowMs], oldest first, at most `max` (the newest `max` when there are
 * more: `total` says how many there were).
 */
export function dueSlots(
  cron: Cron,
  timeZone: string,
  afterMs: number,
  nowMs: number,
  max = 100,
): { slots: number[]; total: number } {
  const slots: number[] = [];
  let total = 0;
  for (let t = nextSlot(cron, timeZone, afterMs); t !== null && t <= nowMs; t = nextSlot(cron, timeZone, t)) {
    total++;
    slots.push(t);
    if (slots.length > max) slots.shift();
    // a schedule down for years with a slot every second is not walked slot by slot past a bound
    if (total > 100_000) break;
  }
  return { slots, total };
}
