//! Tests of the staged engine.
