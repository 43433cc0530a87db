//! Stage 3, the results: a boot's stream turned into a checked `record`, with
//! the parsers of what the guest sends (`fio`, `debugfs`, `ktap`, `samples`),
//! the independent tracefs `witness`, and the results directory (`dir`).

pub mod builder;
pub mod churn;
pub mod classes;
pub mod compat;
pub mod context;
pub mod debugfs;
pub mod detection;
pub mod dir;
pub mod files;
pub mod fio;
pub mod floor;
pub mod flush_cost;
pub mod ktap;
pub mod machine;
pub mod measured;
pub mod mechanism;
pub mod phases;
pub mod problems;
pub mod record;
pub mod reproducer;
pub mod samples;
pub mod session;
pub mod sleeps;
pub mod trace_events;
pub mod trace_files;
pub mod tracefs;
pub mod warnings;
pub mod witness;
