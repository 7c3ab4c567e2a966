//! Simulated devices: layers under the engine's `BlockDevice` trait that
//! experiments and tests put below a file system, never part of a mount a
//! user makes (except the modeled disk of `ufskit mount -o disk=`, an
//! experiment too).
//! - [`model`]: a spinning disk of the seeds' era, charging each request
//!   the time a real drive would take (deterministic);
//! - [`crash`]: records every write and flush, then builds the images a
//!   power cut could leave;
//! - [`fault`]: fails a chosen write or flush, and everything after it;
//! - [`writelog`]: the crash recorder's log kept in a file, under a real
//!   mount (`-o record=FILE`), replayed by the power-cut tester.
//!
//! Invariants: each layer passes the data through unchanged; the figures
//! a layer reports depend only on the requests it saw.
pub mod crash;
pub mod fault;
pub mod model;
pub mod writelog;
