// Package schedule parses the schedules of periodic jobs and computes their
// ticks.
//
// It is pure: it has no clock and no state. The engine asks a [Schedule]
// for the tick after a time with [Schedule.Next], or for the ticks it
// missed while it was down with [Ticks], and enqueues one job per tick with
// an idempotency key made of the job's name and the tick time. Because every
// process computes the same tick times, however many run and whenever they
// started, they enqueue one job per tick between them.
//
// # Syntax
//
// [Parse] accepts the following forms. Keywords, unit names, month and
// weekday names are case-insensitive; words are separated by any white
// space; time zone names are those of the IANA database (as
// [time.LoadLocation] reads them), and default to UTC.
//
//	form                            example                        ticks
//	every N unit                    every 15 minutes               :00, :15, :30, :45 UTC
//	every unit                      every hour                     every hour on the hour UTC
//	every <Go duration>             every 2h30m                    00:00, 02:30, 05:00, ... UTC
//	@every <Go duration>            @every 30s                     every 30 s
//	daily at HH:MM [in Zone]        daily at 02:00 in Europe/Paris 02:00 Paris time
//	every day at HH:MM [in Zone]    every day at 14:30             14:30 UTC
//	hourly at :MM [in Zone]         hourly at :15                  minute 15 of every hour
//	@yearly, @annually              @yearly                        0 0 1 1 *
//	@monthly                        @monthly                       0 0 1 * *
//	@weekly                         @weekly                        0 0 * * 0
//	@daily, @midnight               @daily                         0 0 * * *
//	@hourly                         @hourly                        0 * * * *
//	minute hour dom month dow       30 9 * * MON-FRI               09:30 UTC on weekdays
//	CRON_TZ=Zone <cron or @...>     CRON_TZ=America/New_York @daily midnight in New York
//	TZ=Zone <cron or @...>          TZ=Asia/Tokyo 0 9 1 * *        09:00 Tokyo on the 1st
//
// The units of "every N unit" are seconds, minutes and hours, with the
// abbreviations s, sec, secs, m, min, mins, h, hr, hrs. Days are not a unit:
// write "daily at HH:MM", or a cron expression, for a schedule that follows
// the calendar.
//
// # Cron expressions
//
// The five fields are, in order:
//
//	field         values           names
//	minute        0-59
//	hour          0-23
//	day-of-month  1-31
//	month         1-12             JAN-DEC
//	day-of-week   0-7, 0 and 7     SUN-SAT
//	              are Sunday
//
// A field is a comma-separated list of items, each one of:
//
//	item     meaning                            examples
//	n        one value                          5, MON
//	a-b      a range, inclusive                 9-17, MON-FRI, SAT-SUN
//	*        every value                        *
//	*/s      every s-th value from the first    */15 (0, 15, 30, 45)
//	a-b/s    every s-th value from a to b       0-30/10 (0, 10, 20, 30)
//	a/s      every s-th value from a to the end 5/20 (5, 25, 45)
//
// A field is restricted when it does not select every value of its range
// ("*/2" and "1-15" are restricted; "*", "0-6" and "1-31" are not). When
// both the day of the month and the day of the week are restricted, a day
// matching either fires: "0 0 13 * FRI" fires on every 13th and on every
// Friday. Otherwise a day must match both, which means the restricted one.
//
// [Parse] refuses an expression whose days never occur, such as "0 0 30 2 *"
// (February 30), with an error that wraps [ErrNeverFires]. "0 0 29 2 *"
// fires in leap years only.
//
// # Intervals are aligned to the Unix epoch
//
// The ticks of an interval are the instants 1970-01-01T00:00:00Z + k×d: the
// multiples of the interval since the Unix epoch, in UTC. "every 15 minutes"
// fires at :00, :15, :30 and :45 whichever process asks and whenever it
// started. An interval is at least one second and a whole number of
// seconds, since tick times go into idempotency keys to the second. An
// interval takes no time zone and ignores daylight-saving changes: "every
// 24h" fires at 00:00 UTC, "every 1 hour" at half past the hour in India
// (UTC+05:30). Use "daily at", "hourly at" or a cron expression for times
// that follow a local clock.
//
// # Daylight-saving time
//
// A cron, daily or hourly schedule fires at the first instant at which the
// wall clock of its location shows a matching minute. Hence:
//
//   - A time that the clock skips when it moves forward does not fire that
//     day: "daily at 02:30 in Europe/Paris" does not fire on the last
//     Sunday of March, when Paris goes from 02:00 straight to 03:00. Put
//     such a job outside 01:00-03:00 if it must run every day.
//   - A time that the clock shows twice when it moves back fires once, the
//     first time: "30 1 * * *" in America/New_York fires at 01:30 EDT on
//     the first Sunday of November, and not again at 01:30 EST an hour
//     later. A schedule that fires every few minutes pauses while the
//     clock repeats the hour it already went through.
//
// Ticks are therefore strictly increasing and never doubled. The location
// is fixed when the spec is parsed; "Local" is refused, since its meaning
// depends on the machine.
//
// # Never firing
//
// Next returns the zero time when a schedule has no tick in the ten years
// after the time it is given. No valid expression waits that long (February
// 29 waits at most eight years, from 2096 to 2104); an expression could fire
// only at times that daylight-saving changes skip.
package schedule
