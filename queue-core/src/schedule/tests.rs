//! Tick arithmetic and the stored form of a schedule.

use std::time::Duration;

use super::*;

fn q() -> QueueName {
    QueueName::new("q").expect("queue")
}

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

#[test]
fn interval_ticks_are_multiples_since_the_epoch() {
    let s = Schedule::every("s", q(), Duration::from_secs(10), "x").expect("schedule");
    assert_eq!(s.latest_tick(ms(25_000)), Some(ms(20_000)));
    assert_eq!(s.latest_tick(ms(20_000)), Some(ms(20_000)));
    assert_eq!(s.next_tick(ms(20_000)), Some(ms(30_000)));
    assert_eq!(s.next_tick(ms(29_999)), Some(ms(30_000)));
}

#[cfg(feature = "cron")]
#[test]
fn cron_ticks_follow_the_time_zone() {
    // 2024-01-01T00:00:00Z is 1_704_067_200_000 ms.
    let midnight_utc = 1_704_067_200_000;
    let s = Schedule::cron("s", q(), "0 9 * * *", "x").expect("schedule");
    assert_eq!(
        s.next_tick(ms(midnight_utc)),
        Some(ms(midnight_utc + 9 * 3_600_000))
    );
    let berlin = s.time_zone("Europe/Berlin").expect("tz");
    // 09:00 in Berlin in winter is 08:00 UTC.
    assert_eq!(
        berlin.next_tick(ms(midnight_utc)),
        Some(ms(midnight_utc + 8 * 3_600_000))
    );
    assert_eq!(
        berlin.latest_tick(ms(midnight_utc + 8 * 3_600_000 + 5)),
        Some(ms(midnight_utc + 8 * 3_600_000))
    );
    let secs = Schedule::cron("s", q(), "*/15 * * * * *", "x").expect("seconds field");
    assert_eq!(
        secs.next_tick(ms(midnight_utc)),
        Some(ms(midnight_utc + 15_000))
    );
}

#[cfg(feature = "cron")]
#[test]
fn bad_cron_definitions_are_invalid_input() {
    for r in [
        Schedule::cron("s", q(), "not cron", "x"),
        Schedule::cron("s", q(), "61 * * * *", "x"),
    ] {
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    }
    let s = Schedule::every("s", q(), Duration::from_secs(1), "x").expect("schedule");
    assert!(matches!(
        s.time_zone("Mars/Olympus"),
        Err(Error::InvalidInput { .. })
    ));
}

/// Without the `cron` feature: intervals in UTC work, stored and read
/// back; a cron expression or another zone is `Unsupported`, also when a
/// store (written by a build with the feature) holds one, and never
/// `Corrupt`.
#[cfg(not(feature = "cron"))]
#[test]
fn without_the_cron_feature_cron_and_zones_are_unsupported() {
    let unsupported = |r: Result<Schedule>| matches!(r, Err(Error::Unsupported { .. }));
    assert!(unsupported(Schedule::cron("s", q(), "0 3 * * *", "x")));
    let s = Schedule::every("s", q(), Duration::from_secs(10), "x").expect("schedule");
    assert!(unsupported(s.clone().time_zone("Europe/Berlin")));
    let utc = s.clone().time_zone("UTC").expect("UTC needs no feature");
    assert_eq!(utc.next_tick(ms(20_000)), Some(ms(30_000)));
    let stored = |spec: &str| StoredSchedule {
        name: s.name().clone(),
        queue: s.queue().clone(),
        spec: spec.to_owned(),
        payload: s.payload().clone(),
        revision: 1,
        defined_at: ms(0),
        last_tick: None,
    };
    assert_eq!(
        Schedule::from_stored(&stored(&s.spec())).expect("parses"),
        s
    );
    let spec = s.spec();
    assert!(
        spec.contains(r#""every_ms":10000"#) && spec.contains(r#""tz":"UTC""#),
        "{spec}"
    );
    let cron = spec.replace(r#""every_ms":10000"#, r#""cron":"0 3 * * *""#);
    let zoned = spec.replace(r#""tz":"UTC""#, r#""tz":"Europe/Berlin""#);
    for spec in [cron, zoned] {
        let r = Schedule::from_stored(&stored(&spec));
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{spec}: {r:?}");
    }
}

#[test]
fn bad_definitions_are_invalid_input() {
    for r in [
        Schedule::every("s", q(), Duration::ZERO, "x"),
        Schedule::every("s", q(), Duration::from_micros(1500), "x"),
        Schedule::every("bad name", q(), Duration::from_secs(1), "x"),
    ] {
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    }
}

#[cfg(feature = "cron")]
#[test]
fn the_stored_form_round_trips() {
    let s = Schedule::cron("nightly", q(), "0 3 * * *", "payload")
        .expect("schedule")
        .time_zone("America/New_York")
        .expect("tz")
        .missed(Missed::EnqueueLatest)
        .priority(7)
        .max_attempts(3);
    let stored = StoredSchedule {
        name: s.name().clone(),
        queue: s.queue().clone(),
        spec: s.spec(),
        payload: s.payload().clone(),
        revision: 1,
        defined_at: ms(0),
        last_tick: None,
    };
    assert_eq!(Schedule::from_stored(&stored).expect("parses"), s);
    let item = s.item();
    assert_eq!((item.priority, item.max_attempts), (7, 3));
    let broken = StoredSchedule {
        spec: "{\"tz\":\"UTC\"}".into(),
        ..stored
    };
    assert!(matches!(
        Schedule::from_stored(&broken),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn missed_policies_parse() {
    assert_eq!("skip".parse::<Missed>().ok(), Some(Missed::Skip));
    assert_eq!(
        "enqueue-latest".parse::<Missed>().ok(),
        Some(Missed::EnqueueLatest)
    );
    assert_eq!(
        "ENQUEUE_LATEST".parse::<Missed>().ok(),
        Some(Missed::EnqueueLatest)
    );
    assert!("sometimes".parse::<Missed>().is_err());
}

#[test]
fn a_fire_is_refused_in_the_contracts_order() {
    let name = ScheduleName::new("s").expect("name");
    let tick = ScheduleTick {
        name,
        revision: 2,
        at: ms(1_000),
    };
    // Gone, or another revision: stale, whatever else holds.
    assert_eq!(tick.refusal(None, ms(5_000)), Some(Fired::Stale));
    assert_eq!(
        tick.refusal(Some((1, Some(ms(2_000)))), ms(0)),
        Some(Fired::Stale)
    );
    // Fired at or after the tick: already fired, even when not yet due.
    assert_eq!(
        tick.refusal(Some((2, Some(ms(1_000)))), ms(0)),
        Some(Fired::AlreadyFired {
            last_tick: ms(1_000)
        })
    );
    // Not due on the backend's clock.
    assert_eq!(
        tick.refusal(Some((2, Some(ms(999)))), ms(999)),
        Some(Fired::NotDue { now: ms(999) })
    );
    // Due, current, and later than the last tick: fire.
    assert_eq!(tick.refusal(Some((2, Some(ms(999)))), ms(1_000)), None);
    assert_eq!(tick.refusal(Some((2, None)), ms(1_000)), None);
}
