//! A path the checker found, as a readable trace: one action per line,
//! each naming the `Backend` call, its arguments, the store's answer,
//! whether the reply was lost, and what the worker reported.

use std::fmt::Write;

use crate::model::{Action, Fate, LeaseModel, Reply};
use crate::state::{Fin, Outcome, Phase, Slot, State};

impl LeaseModel {
    /// Renders `actions`, run from the initial state, one line per step,
    /// then the store's final items and the properties broken on the way.
    pub fn trace(&self, actions: &[Action]) -> String {
        let mut out = String::new();
        let mut s = self.initial();
        for (k, &a) in actions.iter().enumerate() {
            let who = who(a);
            let args = args(&s, a);
            let Some((next, step)) = self.step(&s, a) else {
                let _ = writeln!(
                    out,
                    "{:>3}. t={} {who:<5} {args}  (not enabled)",
                    k + 1,
                    s.now
                );
                break;
            };
            let mut line = format!("{:>3}. t={} {who:<5} {args}", k + 1, s.now);
            let answer = reply(&step.reply);
            if !answer.is_empty() {
                let _ = write!(line, " -> {answer}");
            }
            if step.lost {
                line.push_str(", reply LOST");
            }
            if let Some((item, token, outcome)) = step.report {
                let _ = write!(
                    line,
                    " => reports item {item} ({token}) {}",
                    outcome_str(outcome)
                );
            }
            let _ = writeln!(out, "{line}");
            s = next;
        }
        let items: Vec<String> = s
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| {
                format!(
                    "item {i} {} ({}/{} attempts)",
                    slot(it.slot),
                    it.attempts,
                    it.max_attempts
                )
            })
            .collect();
        let _ = writeln!(out, "     end t={}: {}", s.now, items.join(", "));
        if !s.ghost.broken.is_empty() {
            let _ = writeln!(out, "     broken: {:?}", s.ghost.broken);
        }
        out
    }
}

fn who(a: Action) -> String {
    match a {
        Action::Tick => "clock".to_string(),
        Action::Reap { reaper } | Action::ReapRead { reaper } | Action::ReapRequeue { reaper } => {
            format!("r{reaper}")
        }
        Action::Claim { worker, .. }
        | Action::Recover { worker }
        | Action::Run { worker }
        | Action::Extend { worker }
        | Action::Finish { worker, .. }
        | Action::Fate { worker }
        | Action::Resend { worker }
        | Action::Crash { worker } => format!("w{worker}"),
    }
}

/// The call with its arguments, read from the state before the step.
fn args(s: &State, a: Action) -> String {
    let worker = |w: u8| &s.workers[w as usize];
    let first = |w: u8| match &worker(w).phase {
        Phase::Holding { leases, .. }
        | Phase::Settling { leases, .. }
        | Phase::Resend { leases, .. } => leases
            .first()
            .map(|h| format!("item {} {} held_until t={}", h.item, h.token, h.until)),
        _ => None,
    };
    let call = a.call();
    match a {
        Action::Tick => format!("t -> {}", s.now + 1),
        Action::Claim { worker: w, .. } => {
            let wk = worker(w);
            let (c, again) = match wk.phase {
                Phase::Reclaim(f) => (f.claim, " again"),
                _ => (wk.claims, ""),
            };
            format!("claim(spec w{w}#{c}){again}")
        }
        Action::Recover { worker: w } => match worker(w).phase {
            Phase::Recovering(f) => format!("recover_claim(spec w{}#{})", f.worker, f.claim),
            _ => call.to_string(),
        },
        Action::Run { worker: w } => format!("handler runs on {}", first(w).unwrap_or_default()),
        Action::Crash { .. } => "crashes".to_string(),
        Action::Resend { worker: w } => {
            let op = match worker(w).phase {
                Phase::Resend { op, .. } => op.call(),
                _ => "",
            };
            format!("{op} again ({})", first(w).unwrap_or_default())
        }
        Action::Extend { worker: w }
        | Action::Finish { worker: w, .. }
        | Action::Fate { worker: w } => {
            format!("{call}({})", first(w).unwrap_or_default())
        }
        Action::Reap { .. } | Action::ReapRead { .. } | Action::ReapRequeue { .. } => {
            call.to_string()
        }
    }
}

fn reply(r: &Reply) -> String {
    match r {
        Reply::Nothing => String::new(),
        Reply::Leases(v) if v.is_empty() => "[]".to_string(),
        Reply::Leases(v) => {
            let l: Vec<String> = v
                .iter()
                .map(|(i, t, e)| format!("item {i} {t} expires t={e}"))
                .collect();
            format!("[{}]", l.join(", "))
        }
        Reply::Fenced(true) => "Ok".to_string(),
        Reply::Fenced(false) => "LeaseLost".to_string(),
        Reply::Extended(Some(e)) => format!("Ok, expires t={e}"),
        Reply::Extended(None) => "LeaseLost".to_string(),
        Reply::Fate(Fate::Held) => "Held".to_string(),
        Reply::Fate(Fate::Finished) => "Finished".to_string(),
        Reply::Fate(Fate::Lost) => "Lost".to_string(),
        Reply::Reaped(r, d) => format!("requeued {r}, dead {d}"),
        Reply::Read(v) => {
            let l: Vec<String> = v.iter().map(|(i, t)| format!("item {i} {t}")).collect();
            format!("expired: {}", l.join(", "))
        }
    }
}

fn outcome_str(o: Outcome) -> &'static str {
    match o {
        Outcome::Done(Fin::Ack) => "acked",
        Outcome::Done(Fin::Fail) => "failed",
        Outcome::Done(_) => "released",
        Outcome::LeaseLost => "LeaseLost",
        Outcome::Vanished => "LeaseVanished",
    }
}

fn slot(s: Slot) -> String {
    match s {
        Slot::Ready => "Ready".to_string(),
        Slot::Scheduled { due } => format!("Scheduled(due t={due})"),
        Slot::Leased { token, expires } => format!("Leased({token}, expires t={expires})"),
        Slot::Dead => "Dead".to_string(),
        Slot::Acked => "acked (gone)".to_string(),
    }
}
