//! PostgreSQL's face: pg_catalog and information_schema, rewrites of the SQL that drivers
//! and tools send, PostgreSQL's functions and settings, parameter types and hints.

pub(crate) mod array_literal;
pub(crate) mod catalog;
pub(crate) mod function_hint;
pub mod functions;
pub(crate) mod param_types;
pub(crate) mod rewrite;
