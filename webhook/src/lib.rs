//! sched-webhook: the admission webhook (arrives with its issue).
