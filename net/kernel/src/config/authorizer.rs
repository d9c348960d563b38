//! The authorizer's settings, Kafka's names: `authorizer.class.name` turns
//! ACL enforcement on (unset: every request is allowed, as Kafka without an
//! authorizer), `super.users` (`User:a;User:b`) are allowed everything, and
//! `allow.everyone.if.no.acl.found` decides for resources no ACL names.

use crate::error::ConfigError;

/// KRaft's authorizer class, the one rill implements.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// ZooKeeper-era Kafka's class: same rules, accepted so old files start.
pub const ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

/// The settings, with Kafka's defaults (no authorizer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `authorizer.class.name` is set: ACLs are enforced.
    pub enabled: bool,
    /// `super.users`, each `Type:name`.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found` (default false).
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Applies one broker setting if it is one of these; `Ok(false)` when
    /// `name` is not. Another authorizer class stops the broker at start:
    /// running without the ACLs an operator asked for would be silent
    /// insecurity.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "authorizer.class.name" => {
                self.enabled = match value.trim() {
                    "" => false,
                    STANDARD_AUTHORIZER | ACL_AUTHORIZER => true,
                    _ => {
                        return Err(ConfigError::invalid(
                            name,
                            value,
                            "rill implements only Kafka's standard authorizer \
                             (org.apache.kafka.metadata.authorizer.StandardAuthorizer \
                             or kafka.security.authorizer.AclAuthorizer)",
                        ))
                    }
                }
            }
            "super.users" => {
                let mut users = Vec::new();
                for user in value.split(';').map(str::trim).filter(|u| !u.is_empty()) {
                    match security::Principal::parse(user) {
                        Some(principal) if !principal.name.is_empty() => {
                            users.push(principal.to_string())
                        }
                        _ => {
                            return Err(ConfigError::invalid(
                                name,
                                value,
                                "expected Type:name entries separated by ';'",
                            ))
                        }
                    }
                }
                self.super_users = users;
            }
            "allow.everyone.if.no.acl.found" => {
                self.allow_everyone_if_no_acl_found = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(ConfigError::invalid(name, value, "true or false")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_keys_and_refusals() {
        let mut config = AuthorizerConfig::default();
        assert!(!config.enabled && !config.allow_everyone_if_no_acl_found);
        assert_eq!(config.apply("num.partitions", "3").ok(), Some(false));
        assert_eq!(
            config
                .apply("authorizer.class.name", STANDARD_AUTHORIZER)
                .ok(),
            Some(true)
        );
        assert!(config.enabled);
        assert_eq!(config.apply("authorizer.class.name", "").ok(), Some(true));
        assert!(!config.enabled);
        assert_eq!(
            config.apply("authorizer.class.name", ACL_AUTHORIZER).ok(),
            Some(true)
        );
        assert!(config.enabled);
        assert!(config
            .apply("authorizer.class.name", "com.example.MyAuthorizer")
            .is_err());
        assert_eq!(
            config.apply("super.users", "User:admin; User:ops;").ok(),
            Some(true)
        );
        assert_eq!(config.super_users, vec!["User:admin", "User:ops"]);
        assert!(config.apply("super.users", "admin").is_err());
        assert_eq!(
            config.apply("allow.everyone.if.no.acl.found", "true").ok(),
            Some(true)
        );
        assert!(config.allow_everyone_if_no_acl_found);
        assert!(config
            .apply("allow.everyone.if.no.acl.found", "yes")
            .is_err());
    }
}
