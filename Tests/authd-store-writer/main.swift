import AuthStore
