print("authctl")
