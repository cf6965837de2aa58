//! `kubectl sched`: explain and preempt (the commands arrive with their issues).
fn main() {}
