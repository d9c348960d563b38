//! ACLs, Kafka's model and rules.
//!
//! - [`model`]: resource types, pattern types, operations, permissions
//!   (Kafka's codes), ACL bindings and the filters of DescribeAcls and
//!   DeleteAcls.
//! - [`authorizer`]: Kafka's `StandardAuthorizer` decision over a set of
//!   ACLs (pure).
//! - [`checks`]: [`Authz`], the one object a handler asks ("may this
//!   request's principal WRITE topic t?"), answering with Kafka's error
//!   code for a refusal. Built per request by
//!   `cluster_runtime::authz(shard, session)`, which reads the ACLs of the
//!   shard's metadata image.
//! - [`operations`]: KIP-430's authorized-operations bit fields.

pub mod authorizer;
pub mod checks;
pub mod model;
pub mod operations;

pub use authorizer::Authorizer;
pub use checks::Authz;
pub use model::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
