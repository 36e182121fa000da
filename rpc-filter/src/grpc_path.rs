//! The service and method of a gRPC call, from its path.

/// `("package.Service", "Method")` from `/package.Service/Method`; `None` for any other
/// shape.
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    let valid = |part: &str| !part.is_empty() && !part.contains('/');
    (valid(service) && valid(method)).then_some((service, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_service_and_method() {
        assert_eq!(
            split_path("/helloworld.Greeter/SayHello"),
            Some(("helloworld.Greeter", "SayHello"))
        );
        assert_eq!(split_path("/a/b/c"), None);
        assert_eq!(split_path("/a/"), None);
        assert_eq!(split_path("a/b"), None);
    }
}
