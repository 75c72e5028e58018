print("prep-artifact")
