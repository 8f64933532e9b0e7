//! Urgency in the spirit of Taskwarrior's, without the terms spice ranks separately.
//!
//! Taskwarrior's default coefficients: due 12 (scaled from 0.2 two weeks out to 1.0 a
//! week overdue), age 2 (over a year), tags 1, project 1, annotations 1, the `next` tag
//! 15. Priority and "blocking" are left out: spice ranks inherited priority and
//! downstream release before urgency, so counting them again would only blur the
//! tie-break. Urgency is rounded to 0.1 so that near-equal tasks fall through to the
//! spread and locality tie-breaks instead of being split by a few hours of age.

use crate::clock::Micros;
use crate::task::Task;

const DAY: f64 = 86_400_000_000.0;

pub fn urgency(task: &Task, now: Micros) -> f64 {
    Parts::of(task).at(now)
}

/// What urgency reads of a task, so a ranking kept between claims
/// ([`super::order`]) computes it without the task, exactly as [`urgency`] does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parts {
    pub due: Option<Micros>,
    pub entry: Micros,
    /// Tag and annotation counts, capped at 3 (nothing counts more).
    pub tags: u8,
    pub annotations: u8,
    pub project: bool,
    /// Tagged `next`.
    pub next: bool,
}

impl Parts {
    pub fn of(task: &Task) -> Parts {
        Parts {
            due: task.due,
            entry: task.entry,
            tags: task.tags.len().min(3) as u8,
            annotations: task.annotations.len().min(3) as u8,
            project: task.project.is_some(),
            next: task.tags.iter().any(|t| t == "next"),
        }
    }

    /// The urgency at `now`.
    pub fn at(&self, now: Micros) -> f64 {
        let mut u = 0.0;
        if let Some(due) = self.due {
            u += 12.0 * due_factor((now - due) as f64 / DAY);
        }
        u += 2.0 * ((now - self.entry) as f64 / DAY / 365.0).clamp(0.0, 1.0);
        u += 1.0 * count_factor(self.tags.into());
        if self.project {
            u += 1.0;
        }
        u += 1.0 * count_factor(self.annotations.into());
        if self.next {
            u += 15.0;
        }
        (u * 10.0).round() / 10.0
    }
}

/// Taskwarrior's due curve: 1.0 from a week overdue, 0.2 from two weeks ahead,
/// linear between.
fn due_factor(days_overdue: f64) -> f64 {
    if days_overdue >= 7.0 {
        1.0
    } else if days_overdue >= -14.0 {
        ((days_overdue + 14.0) * 0.8 / 21.0) + 0.2
    } else {
        0.2
    }
}

fn count_factor(n: usize) -> f64 {
    match n {
        0 => 0.0,
        1 => 0.8,
        2 => 0.9,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_curve_matches_taskwarrior() {
        assert_eq!(due_factor(10.0), 1.0);
        assert_eq!(due_factor(-30.0), 0.2);
        assert!((due_factor(0.0) - (14.0 * 0.8 / 21.0 + 0.2)).abs() < 1e-9);
        assert!(due_factor(-1.0) < due_factor(1.0));
    }
}
