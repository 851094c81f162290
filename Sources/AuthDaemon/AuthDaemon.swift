import AuthCore
