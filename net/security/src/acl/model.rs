//! Kafka's ACL vocabulary, with Kafka's wire codes (`ResourceType`,
//! `PatternType`, `AclOperation`, `AclPermissionType` of
//! `org.apache.kafka.common`), ACL bindings and the filters DescribeAcls and
//! DeleteAcls match them with (`AclBindingFilter`).

use crate::Principal;

/// What an ACL protects (Kafka's `ResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// Only in filters: any type.
    Any,
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster (one resource, `kafka-cluster`).
    Cluster,
    /// A transactional id.
    TransactionalId,
    /// A delegation token (stored; rill has no delegation tokens).
    DelegationToken,
    /// A user (stored; rill has no user quotas or token APIs).
    User,
}

impl ResourceType {
    /// From Kafka's code; `None` for UNKNOWN (0) and unknown codes.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            1 => ResourceType::Any,
            2 => ResourceType::Topic,
            3 => ResourceType::Group,
            4 => ResourceType::Cluster,
            5 => ResourceType::TransactionalId,
            6 => ResourceType::DelegationToken,
            7 => ResourceType::User,
            _ => return None,
        })
    }

    /// Kafka's code.
    pub fn code(self) -> i8 {
        match self {
            ResourceType::Any => 1,
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }
}

/// How an ACL's resource name matches (Kafka's `PatternType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    /// Only in filters: any pattern type, the name matched exactly.
    Any,
    /// Only in filters: every ACL that would apply to the named resource.
    Match,
    /// The exact name (or `*`, every resource of the type).
    Literal,
    /// Every resource whose name starts with the ACL's name.
    Prefixed,
}

impl PatternType {
    /// From Kafka's code; `None` for UNKNOWN (0) and unknown codes.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            1 => PatternType::Any,
            2 => PatternType::Match,
            3 => PatternType::Literal,
            4 => PatternType::Prefixed,
            _ => return None,
        })
    }

    /// Kafka's code.
    pub fn code(self) -> i8 {
        match self {
            PatternType::Any => 1,
            PatternType::Match => 2,
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// What a principal does to a resource (Kafka's `AclOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Only in filters: any operation.
    Any,
    /// Every operation.
    All,
    /// Consume; commit and fetch offsets.
    Read,
    /// Produce.
    Write,
    /// Create topics.
    Create,
    /// Delete topics, records, groups.
    Delete,
    /// Change partitions, reassign, manage the quorum.
    Alter,
    /// See metadata, offsets, groups.
    Describe,
    /// Broker-to-broker requests.
    ClusterAction,
    /// Read configs.
    DescribeConfigs,
    /// Change configs.
    AlterConfigs,
    /// Idempotent produce without a transactional id.
    IdempotentWrite,
    /// Create delegation tokens.
    CreateTokens,
    /// Describe delegation tokens.
    DescribeTokens,
}

impl Operation {
    /// From Kafka's code; `None` for UNKNOWN (0) and unknown codes.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            1 => Operation::Any,
            2 => Operation::All,
            3 => Operation::Read,
            4 => Operation::Write,
            5 => Operation::Create,
            6 => Operation::Delete,
            7 => Operation::Alter,
            8 => Operation::Describe,
            9 => Operation::ClusterAction,
            10 => Operation::DescribeConfigs,
            11 => Operation::AlterConfigs,
            12 => Operation::IdempotentWrite,
            13 => Operation::CreateTokens,
            14 => Operation::DescribeTokens,
            _ => return None,
        })
    }

    /// Kafka's code.
    pub fn code(self) -> i8 {
        match self {
            Operation::Any => 1,
            Operation::All => 2,
            Operation::Read => 3,
            Operation::Write => 4,
            Operation::Create => 5,
            Operation::Delete => 6,
            Operation::Alter => 7,
            Operation::Describe => 8,
            Operation::ClusterAction => 9,
            Operation::DescribeConfigs => 10,
            Operation::AlterConfigs => 11,
            Operation::IdempotentWrite => 12,
            Operation::CreateTokens => 13,
            Operation::DescribeTokens => 14,
        }
    }

    /// Whether an ALLOW ACL for `self` grants `wanted`: the same operation,
    /// ALL, or an operation that implies it (Kafka: READ, WRITE, DELETE and
    /// ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
    pub fn allow_grants(self, wanted: Operation) -> bool {
        self == wanted
            || self == Operation::All
            || (wanted == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ))
            || (wanted == Operation::DescribeConfigs && self == Operation::AlterConfigs)
    }

    /// Whether a DENY ACL for `self` refuses `wanted` (no implication).
    pub fn deny_refuses(self, wanted: Operation) -> bool {
        self == wanted || self == Operation::All
    }
}

/// ALLOW or DENY (Kafka's `AclPermissionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// Only in filters: either.
    Any,
    /// Refuses, whatever else allows.
    Deny,
    /// Grants, unless a DENY matches.
    Allow,
}

impl Permission {
    /// From Kafka's code; `None` for UNKNOWN (0) and unknown codes.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            1 => Permission::Any,
            2 => Permission::Deny,
            3 => Permission::Allow,
            _ => return None,
        })
    }

    /// Kafka's code.
    pub fn code(self) -> i8 {
        match self {
            Permission::Any => 1,
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }
}

/// The wildcard resource name (every resource of a type).
pub const WILDCARD_RESOURCE: &str = "*";
/// The wildcard principal (every principal).
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The wildcard host (every client address).
pub const WILDCARD_HOST: &str = "*";
/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// One ACL (Kafka's `AclBinding`: a resource pattern and an entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resource type (never `Any`).
    pub resource_type: ResourceType,
    /// The resource name, `*` for all.
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
    /// `User:name` or `User:*`.
    pub principal: String,
    /// A client address or `*`.
    pub host: String,
    /// The operation (never `Any`).
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

impl AclBinding {
    /// Builds a binding from Kafka's codes, checked as Kafka's controller
    /// checks a new ACL; the reason (for INVALID_REQUEST) if it is not one.
    pub fn from_codes(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, String> {
        let resource_type = ResourceType::from_code(resource_type)
            .filter(|t| *t != ResourceType::Any)
            .ok_or_else(|| format!("invalid resource type {resource_type}"))?;
        let pattern_type = PatternType::from_code(pattern_type)
            .filter(|p| matches!(p, PatternType::Literal | PatternType::Prefixed))
            .ok_or_else(|| format!("invalid pattern type {pattern_type}: LITERAL or PREFIXED"))?;
        let operation = Operation::from_code(operation)
            .filter(|o| *o != Operation::Any)
            .ok_or_else(|| format!("invalid operation {operation}"))?;
        let permission = Permission::from_code(permission)
            .filter(|p| *p != Permission::Any)
            .ok_or_else(|| format!("invalid permission type {permission}: ALLOW or DENY"))?;
        if resource_name.is_empty() {
            return Err(String::from("resource name should not be empty"));
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(format!(
                "the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if Principal::parse(principal).is_none_or(|p| p.name.is_empty()) {
            return Err(format!("could not parse principal {principal:?}"));
        }
        if host.is_empty() {
            return Err(String::from("invalid empty host"));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: resource_name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: host.to_string(),
            operation,
            permission,
        })
    }
}

/// A DescribeAcls / DeleteAcls filter (Kafka's `AclBindingFilter`): `None`
/// and the `Any` values match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type or `Any`.
    pub resource_type: ResourceType,
    /// Resource name, `None` for any.
    pub resource_name: Option<String>,
    /// Pattern type, `Any` or `Match`.
    pub pattern_type: PatternType,
    /// Principal, `None` for any.
    pub principal: Option<String>,
    /// Host, `None` for any.
    pub host: Option<String>,
    /// Operation or `Any`.
    pub operation: Operation,
    /// Permission or `Any`.
    pub permission: Permission,
}

impl AclFilter {
    /// Builds a filter from Kafka's codes; the reason (for INVALID_REQUEST)
    /// when a code is UNKNOWN or not a code at all.
    pub fn from_codes(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, String> {
        Ok(AclFilter {
            resource_type: ResourceType::from_code(resource_type)
                .ok_or_else(|| format!("invalid resource type filter {resource_type}"))?,
            resource_name: resource_name.map(str::to_string),
            pattern_type: PatternType::from_code(pattern_type)
                .ok_or_else(|| format!("invalid pattern type filter {pattern_type}"))?,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: Operation::from_code(operation)
                .ok_or_else(|| format!("invalid operation filter {operation}"))?,
            permission: Permission::from_code(permission)
                .ok_or_else(|| format!("invalid permission filter {permission}"))?,
        })
    }

    /// The filter that matches every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// Whether `acl` matches (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_resource(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }

    fn matches_resource(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        // MATCH: every ACL that applies to the resource `name`.
        match acl.pattern_type {
            PatternType::Literal => {
                *name == acl.resource_name || acl.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
            PatternType::Any | PatternType::Match => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_is_refused() {
        for code in 1..=7 {
            assert_eq!(ResourceType::from_code(code).map(|t| t.code()), Some(code));
        }
        for code in 1..=4 {
            assert_eq!(PatternType::from_code(code).map(|t| t.code()), Some(code));
        }
        for code in 1..=14 {
            assert_eq!(Operation::from_code(code).map(|t| t.code()), Some(code));
        }
        for code in 1..=3 {
            assert_eq!(Permission::from_code(code).map(|t| t.code()), Some(code));
        }
        assert_eq!(ResourceType::from_code(0), None);
        assert_eq!(PatternType::from_code(5), None);
        assert_eq!(Operation::from_code(15), None);
        assert_eq!(Permission::from_code(-1), None);
    }

    #[test]
    fn new_acls_are_checked_as_kafka_does() {
        let ok = |t, name: &str, p, principal: &str, host: &str, op, perm| {
            AclBinding::from_codes(t, name, p, principal, host, op, perm)
        };
        assert!(ok(2, "a", 3, "User:alice", "*", 3, 3).is_ok());
        assert!(ok(4, "kafka-cluster", 3, "User:*", "10.0.0.1", 2, 2).is_ok());
        let bad = [
            (1, "a", 3, "User:alice", "*", 3, 3),     // ANY type
            (0, "a", 3, "User:alice", "*", 3, 3),     // UNKNOWN type
            (2, "a", 2, "User:alice", "*", 3, 3),     // MATCH pattern
            (2, "a", 1, "User:alice", "*", 3, 3),     // ANY pattern
            (2, "a", 3, "User:alice", "*", 1, 3),     // ANY operation
            (2, "a", 3, "User:alice", "*", 3, 1),     // ANY permission
            (2, "", 3, "User:alice", "*", 3, 3),      // empty name
            (4, "other", 3, "User:alice", "*", 3, 3), // cluster name
            (2, "a", 3, "alice", "*", 3, 3),          // principal
            (2, "a", 3, "User:", "*", 3, 3),          // empty principal name
            (2, "a", 3, "User:alice", "", 3, 3),      // host
        ];
        for (t, name, p, principal, host, op, perm) in bad {
            assert!(
                ok(t, name, p, principal, host, op, perm).is_err(),
                "{t} {name} {p} {principal} {host} {op} {perm}"
            );
        }
    }

    fn acl(name: &str, pattern: PatternType) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.to_string(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn filters_match_as_kafka_does() {
        use PatternType::*;
        let filter = |name: Option<&str>, pattern| AclFilter {
            resource_name: name.map(str::to_string),
            pattern_type: pattern,
            ..AclFilter::any()
        };
        // (filter name, filter pattern, acl name, acl pattern, matches)
        let table = [
            (None, Any, "x", Literal, true),
            (None, Literal, "x", Prefixed, false),
            (None, Prefixed, "x", Prefixed, true),
            (None, Match, "x", Prefixed, true),
            (Some("foo"), Any, "foo", Literal, true),
            (Some("foo"), Any, "foo", Prefixed, true),
            (Some("foo"), Any, "*", Literal, false),
            (Some("foo"), Literal, "foo", Literal, true),
            (Some("foo"), Literal, "fo", Literal, false),
            (Some("foo"), Prefixed, "fo", Prefixed, false),
            (Some("fo"), Prefixed, "fo", Prefixed, true),
            (Some("foo"), Match, "foo", Literal, true),
            (Some("foo"), Match, "*", Literal, true),
            (Some("foo"), Match, "fo", Prefixed, true),
            (Some("foo"), Match, "foo", Prefixed, true),
            (Some("foo"), Match, "foob", Prefixed, false),
            (Some("foo"), Match, "bar", Literal, false),
        ];
        for (name, pattern, acl_name, acl_pattern, expected) in table {
            assert_eq!(
                filter(name, pattern).matches(&acl(acl_name, acl_pattern)),
                expected,
                "{name:?} {pattern:?} vs {acl_name} {acl_pattern:?}"
            );
        }
        let a = acl("t", Literal);
        let by = |f: AclFilter| f.matches(&a);
        assert!(by(AclFilter {
            principal: Some("User:alice".into()),
            ..AclFilter::any()
        }));
        assert!(!by(AclFilter {
            principal: Some("User:bob".into()),
            ..AclFilter::any()
        }));
        assert!(!by(AclFilter {
            host: Some("1.2.3.4".into()),
            ..AclFilter::any()
        }));
        assert!(!by(AclFilter {
            operation: Operation::Write,
            ..AclFilter::any()
        }));
        assert!(!by(AclFilter {
            permission: Permission::Deny,
            ..AclFilter::any()
        }));
        assert!(!by(AclFilter {
            resource_type: ResourceType::Group,
            ..AclFilter::any()
        }));
        assert!(AclFilter::from_codes(0, None, 1, None, None, 1, 1).is_err());
        assert!(AclFilter::from_codes(1, None, 1, None, None, 1, 1).is_ok());
    }
}
