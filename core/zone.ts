/**
 * IANA time zones through `Intl` (no zone data of our own): the offset of a zone's wall clock
 * from UTC at an instant. Used for a game's days (analytics) and for calendar times named by a
 * TZID (rosters).
 */

/** The function giving zone `name`'s local time minus UTC (ms) at an instant; undefined for an unknown zone. */
export function zoneOffset(name: string): ((ms: number) => number) | undefined {
  let f: Intl.DateTimeFormat
  try {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
  } catch {
    return undefined
  }
  return (ms) => {
    const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, Number(x.value)]))
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - Math.floor(ms / 1000) * 1000
  }
}
