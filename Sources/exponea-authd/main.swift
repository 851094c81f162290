print("exponea-authd")
